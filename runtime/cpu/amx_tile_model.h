#pragma once
// A scalar model of the AMX tile instructions the GEMM uses (amx_tiles.h lists them), written from the
// pseudocode of Intel's SDM, so that the AMX GEMM runs unchanged on a CPU without AMX and can be compared
// bit for bit with the VNNI one. Where the hardware would fault (#GP on a bad configuration, #UD on a tile
// instruction with no configuration or with shapes that do not agree), the model throws qt::Error: a kernel
// that passes through the model does not fault on the tiles either. Loads and stores touch exactly the
// bytes the hardware would, so a sanitizer run of the model also checks the kernel's tile addressing.
//
// One model per thread, as the hardware keeps one tile state per thread.
#include <cstdint>

#include "runtime/cpu/amx_tiles.h"

namespace qt::rt {

class AmxTileModel {
 public:
  static AmxTileModel& this_thread();

  void configure(const TileConfig& cfg);
  void release();
  template <int T>
  void load(const void* base, int64_t stride) {
    load_tile(T, base, stride);
  }
  template <int T>
  void store(void* base, int64_t stride) const {
    store_tile(T, base, stride);
  }
  template <int C, int A, int B>
  void dpbsud() {
    dot_tiles(C, A, B);
  }

  bool configured() const { return palette_ != 0; }
  // TDPBSUD instructions run by the models of all threads so far: tests check with it that a kernel took the
  // tiles at all.
  static uint64_t products_run();
  // The shape LDTILECFG gave tile t (tests read it back).
  int rows(int t) const { return rows_[t]; }
  int colsb(int t) const { return colsb_[t]; }

 private:
  void require_configured(const char* instruction) const;
  void load_tile(int t, const void* base, int64_t stride);
  void store_tile(int t, void* base, int64_t stride) const;
  void dot_tiles(int c, int a, int b);

  int palette_ = 0;
  int rows_[kTileCount] = {}, colsb_[kTileCount] = {};
  uint8_t data_[kTileCount][kTileMaxRows][kTileMaxColsb] = {};
};

}  // namespace qt::rt
