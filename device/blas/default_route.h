#pragma once
// Where a linear layer runs when cuBLASLt is at hand and no tuned dispatch covers its batch bucket. Written once
// for the runtime (DeviceBackend::linear) and the static step model (tuner/static/step_launches.cpp), which must
// issue the same launches. The thresholds are measured, on an H200 (results/gpu-h200-2026-11-27, the Qwen3-8B
// and Qwen3-30B-A3B shapes), against the kernel families' default points that ran there otherwise:
//   - fp16 weights above one row go to cuBLASLt: on the lm_head (151936 x 4096) f16_gemv took 619 us at M = 4
//     and 616 at M = 16 where cuBLASLt took 309 and 313; at M = 1 f16_gemv wins (286 against 308).
//   - quantized weights held in the frag layout (the projections' default) from kDequantBlasRows rows are
//     dequantized to fp16 by their type's frag dequant family, then multiplied by cuBLASLt: at M = 64 that was
//     1.3-3.5x faster than the default awq_frag_gemm / q8_0_frag_gemm point on 6 of 7 shapes (5% slower on
//     12288 x 4096), and 1.3-3.9x faster on every shape at M >= 256, where the prefill chunk runs. Weights in
//     the file layout (a Q8_0 lm_head) were not measured there and stay on the families.
//   - everything else stays on our kernel families.
// A tuned dispatch overrides all of this per bucket: it ranks the baselines beside the families.
#include <cstdint>

#include "models/core/weight_traits.h"

namespace qt::blas {

// The decode GEMV families serve up to this many rows; above it the GEMM families (or cuBLASLt) take over.
inline constexpr int64_t kDecodeGemvRows = 8;
inline constexpr int64_t kF16GemvRows = 1;
inline constexpr int64_t kDequantBlasRows = 64;
// A quantized projection held with an fp16 copy beside it (qrun --prefill-f16) runs on the copy from this many rows:
// where it would otherwise be dequantized for cuBLASLt, which the copy has done once at load.
inline constexpr int64_t kF16CopyRows = kDequantBlasRows;

// Prompt tokens per prefill chunk on a device. Each chunk dequantizes every quantized weight again (the dequant +
// cuBLASLt route), and cuBLASLt's fp16 GEMM runs faster on more rows (on the H200, 4096 x 4096: 362 TFLOP/s at
// 256 rows, 713 at 1024), so with cuBLASLt a chunk takes 1024 rows; without it, 256, as before.
inline constexpr int64_t kPrefillChunk = 256;
inline constexpr int64_t kPrefillChunkWithBlas = 1024;
inline int64_t prefill_chunk(bool blas_available) { return blas_available ? kPrefillChunkWithBlas : kPrefillChunk; }

enum class Route { kFamilies, kCublasLt, kDequantCublasLt };

inline Route default_route(WeightType type, bool frag_layout, int64_t m, bool blas_available) {
  if (!blas_available) return Route::kFamilies;
  if (type == WeightType::F16) return m > kF16GemvRows ? Route::kCublasLt : Route::kFamilies;
  // A quantized type goes to its dequant + cuBLASLt baseline where device/blas's table has one for its layout.
  return weight_traits(type).quantized && frag_layout && m >= kDequantBlasRows ? Route::kDequantCublasLt
                                                                               : Route::kFamilies;
}

}  // namespace qt::blas
