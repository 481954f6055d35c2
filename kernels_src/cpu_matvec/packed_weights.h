#pragma once
// Weight layouts for the fast path. Q8_0 is used in place (its file layout is already row-major int8);
// INT8 group-wise and AWQ are stored in-major [K][N] in the files, which suits GPUs but not a CPU dot
// product per output row, so they are repacked once into row-major [N][K] forms:
//   INT8_GW_*  -> int8 (q - 128) rows, fp32 scales [N][K/G], fp32 additive zeros [N][K/G] (ASYM only).
//   AWQ_INT4   -> 4-bit rows, 16 bytes per 32 elements (low nibbles: elements 0-15, high: 16-31),
//                 fp32 scales and fp32 zero points [N][K/G]. Needs G % 32 == 0.
// The runtime's CPU backend gives Q8_0, INT8_GW_SYM and AWQ_INT4 matrices the panels of its GEMM instead
// (runtime/cpu/q8_repack.h); these row forms are what the CPU matvec family times and what INT8_GW_ASYM runs on.
#include <cstdint>
#include <vector>

#include "models/core/weights.h"

namespace qt::rt {

class ThreadPool;

struct PackedMatrix {
  enum class Kind { kFloat, kInt8, kUInt4, kUnpacked };  // kUnpacked: the fast path dequantizes rows instead
  Kind kind = Kind::kUnpacked;
  int64_t rows = 0, cols = 0, group = 0;
  const int8_t* i8 = nullptr;    // kInt8: [N][K]
  const uint8_t* u4 = nullptr;   // kUInt4: [N][K/2]
  const float* scale = nullptr;  // [N][K/G]
  const float* zero = nullptr;   // kInt8: additive offset (ASYM) or null; kUInt4: zero point
  std::vector<int8_t> i8_store;
  std::vector<uint8_t> u4_store;
  std::vector<float> scale_store, zero_store;
};

// Builds the fast layout of `t` (no copy for F32/F16/BF16/Q8_0). `pool` may be null.
PackedMatrix pack_for_cpu(const QTensor& t, ThreadPool* pool);

}  // namespace qt::rt
