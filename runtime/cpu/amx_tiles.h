#pragma once
// The AMX tile state as Intel's SDM defines it for palette 1, shared by the two implementations of the tile
// instructions: the real ones (amx_hw_tiles.h, inline assembly) and a scalar model of them
// (amx_tile_model.h). The GEMM (q8_gemm_kernels_amx.cpp) is one template over either, so everything it does
// with tiles (configuration, loads, products, stores, edges) runs and is checked bit for bit through the
// model on a CPU without AMX, and the hardware build differs only in who executes the five instructions.
//
// The interface a Tiles type gives the kernel (T, C, A, B: tile numbers 0..7, known at compile time as the
// instructions encode them):
//   configure(cfg)          LDTILECFG: sets every tile's shape and zeroes all tile data
//   load<T>(base, stride)   TILELOADD: row r of T = the config's colsb(T) bytes at base + r * stride
//   store<T>(base, stride)  TILESTORED: the inverse
//   dpbsud<C, A, B>()       TDPBSUD: C[m][n] += sum_k int8(A[m][4k+i]) * uint8(B[k][4n+i]) over i < 4, in int32
//                           with wraparound, for m < rows(C), n < colsb(C)/4, k < colsb(A)/4
//   release()               TILERELEASE: back to the init state (no tile configured)
#include <cstdint>

namespace qt::rt {

// Palette 1, the only palette of AMX so far: 8 tiles of at most 16 rows of 64 bytes.
constexpr int kTileCount = 8;
constexpr int kTileMaxRows = 16;
constexpr int kTileMaxColsb = 64;

// LDTILECFG's 64-byte memory operand.
struct alignas(64) TileConfig {
  uint8_t palette = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i; only tiles 0..7 exist in palette 1
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads exactly 64 bytes");

}  // namespace qt::rt
