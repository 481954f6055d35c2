#pragma once
// The fragment-ordered weight layout ("frag layout") and its CPU reference repack, bit-exact with the device
// repack (frag_repack.cuh). It serves weight types of the same logical shape, codes q[K][N] with one scale
// per (group of G along K, column):
//   AWQ_INT4      q in 0..15 with a 4-bit zero per (group, column): w = (q - z) * s;
//   INT8_GW_SYM   u in 0..255 stored with +128 bias:                 w = (u - 128) * s.
// Q8_0 (w = q * d, int8 q, one scale d per block of G along K) is INT8_GW_SYM with u = q + 128 and s = d, so
// it is stored as that (bits = 8). Its file scales are fp32 (models/core/weights.h): the layout holds them
// rounded to fp16 (nearest even), the one rounding the repack adds; its reference states the same.
//
// The matrix is cut into tiles of 16 rows of K by 64 columns of N, stored column tile by column tile, K tiles
// in order inside one, so a warp walking K reads one contiguous run. Inside a tile, lane l = 4 g + t of a warp
// holds the mma.m16n8k16 B fragments of the eight 8-column fragments f = 0..7 at column 8 f + g and rows
// 2t, 2t+1, 2t+8, 2t+9; one 16-byte load per lane (INT4) or two (INT8) brings all of them, and each load
// instruction of the warp reads 512 contiguous bytes.
//   INT4: 4 words per lane; word w holds fragments 2w and 2w+1. Nibble i of the word is, for fragment 2w:
//         i=0: row 2t, i=4: row 2t+1, i=1: row 2t+8, i=5: row 2t+9; for fragment 2w+1 the same with i+2. The
//         LOP3 unpack (qt::dequant_u4x8_to_f16x2) then yields the fragment registers b0, b1 of fragment 2w and
//         b0, b1 of fragment 2w+1 in that order.
//   INT8: 8 words per lane in two halves of 128 words: half h holds fragments 4h..4h+3, lane l's four words of
//         a half at 4 l. The word of fragment f holds bytes (row 2t, 2t+1, 2t+8, 2t+9).
// Scales, fp16, per (column tile, group), 64 values: lane t = l % 4 reads two 16-byte runs, run r at
//         32 r + 8 t halves: fragment 4r + i (i = 0..3) contributes columns 8 f + 2t and 8 f + 2t + 1, the
//         two output columns of the mma C fragment this lane holds.
// Zeros (INT4 only), per (column tile, group), 16 words: lane l reads words 2 g, 2 g + 1 in one 8-byte load.
//         Word h holds the zero of column 8 (4h + i) + g at nibbles i and i + 4 (each nibble duplicated in the
//         two halves), so a shift and one LOP3 under the fp16 magic numbers yield each constant of the dequant:
//         the zero at nibbles 0 and 4 under 0x6400 gives 1024 + z, at nibbles 1 and 5 under 0xd400 -(64 + z).
// N is padded to a multiple of 64 with (q - z) = 0 and scale 0, so padded columns compute 0. kPadTiles
// tiles of zero words follow the last weight tile.
#include <cstdint>
#include <vector>

#include "kernels_src/fraglinear/frag_layout_map.h"
#include "models/core/weight_traits.h"
#include "models/core/weights.h"

namespace qt::kernels::frag {

// The layout's constants and index maps: frag_layout_map.h (frag_linear.cuh keeps its own copy of kPadTiles).
constexpr int64_t kTileK = frag_map::kTileK, kTileN = frag_map::kTileN, kPadTiles = frag_map::kPadTiles;

struct FragDims {
  int64_t n = 0, k = 0, group = 0;
  int bits = 4;  // 4 (AWQ_INT4) or 8 (INT8_GW_SYM, Q8_0)
  int64_t n_tiles() const { return frag_map::column_tiles(n); }
  int64_t groups() const { return k / group; }
  int64_t tile_words() const { return frag_map::tile_words(bits); }
  int64_t weight_words() const { return frag_map::weight_words(bits, n, k); }
  int64_t scale_halves() const { return frag_map::scale_halves(n, k, group); }
  int64_t zero_words() const { return frag_map::zero_words(bits, n, k, group); }
};

// "" when the dimensions can be stored in the frag layout, else the reason.
std::string frag_dims_check(const FragDims& d);

// The weight types the frag layout holds (4-bit AWQ, 8-bit group-wise symmetric, Q8_0 as the latter): the
// device runtime loads dense projections of these types in it by default.
inline bool frag_layout_holds(WeightType t) {
  return t == WeightType::AWQ_INT4 || t == WeightType::INT8_GW_SYM || t == WeightType::Q8_0;
}
// The layout's bits for a type it holds.
inline int frag_layout_bits(WeightType t) { return t == WeightType::AWQ_INT4 ? 4 : 8; }

struct FragWeights {
  std::vector<uint32_t> q;       // weight_words()
  std::vector<uint16_t> scales;  // scale_halves(), fp16 bits
  std::vector<uint32_t> zeros;   // zero_words() (empty for INT8)
};

// AWQ's qweight int32 [K][N/8], qzeros int32 [K/G][N/8], fp16 scales [K/G][N] -> frag layout.
FragWeights repack_awq(const FragDims& d, const int32_t* qweight, const int32_t* qzeros, const uint16_t* scales);
// INT8_GW_SYM's q uint8 [K][N] (+128 bias), fp16 scales [K/G][N] -> frag layout.
FragWeights repack_int8(const FragDims& d, const uint8_t* q, const uint16_t* scales);
// Q8_0's q int8 [N][K], fp32 scales [N][K/G] (its file layout) -> frag layout, bits = 8.
FragWeights repack_q8_0(const FragDims& d, const int8_t* q, const float* scales);
// A weight of a type the layout holds (frag_layout_holds), from its file arrays: the repack of its type.
// qt::Error for any other type.
FragWeights repack(const QTensor& t);

}  // namespace qt::kernels::frag
