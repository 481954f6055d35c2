#pragma once
// Device helpers shared by the AWQ kernels: the INT4 -> FP16 magic-number unpack (LOP3), weight
// dequantization (q - z) * s in f16x2, vector loads of packed words, and the split-k reduction.
// Written against kernels_src/common/qt_cuda.h so the same text compiles with NVRTC and in the emulator.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/splitk.cuh"

namespace awq {

// One AWQ word (8 nibbles, element e at nibble {0,4,1,5,2,6,3,7}[e]) -> four f16x2 holding logical
// elements (0,1), (2,3), (4,5), (6,7) as unsigned values 0..15 (LOP3 magic-number trick, qt_cuda.h).
__device__ __forceinline__ void unpack_f16x8(uint32_t w, uint32_t (&h)[4]) { qt::dequant_u4x8_to_f16x2(w, h); }

// Eight fp16 weights (q - z) * s of one packed word: `zero` is the unpacked zero word, `s` the eight scales
// as f16x2. (q - z) is exact in fp16; the product rounds once, as the reference's fp16 weight does.
__device__ __forceinline__ void dequant_f16x8(uint32_t word, const uint32_t (&zero)[4], const uint32_t (&s)[4],
                                              uint32_t (&w)[4]) {
  uint32_t q[4];
  unpack_f16x8(word, q);
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = qt::mul_f16x2(qt::sub_f16x2(q[i], zero[i]), s[i]);
}

__device__ __forceinline__ float lo_f32(uint32_t h2) { return __half2float(__ushort_as_half((unsigned short)(h2 & 0xffffu))); }
__device__ __forceinline__ float hi_f32(uint32_t h2) { return __half2float(__ushort_as_half((unsigned short)(h2 >> 16))); }

// N consecutive 32-bit words with one vector load (p aligned to 4 * N bytes).
template <int N>
__device__ __forceinline__ void load_words(const uint32_t* p, uint32_t (&out)[N]) {
  if constexpr (N == 4) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else if constexpr (N == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    out[0] = v.x, out[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = p[i];
  }
}

// Eight consecutive fp16 values (16-byte aligned) as four f16x2 words.
__device__ __forceinline__ void load_f16x8(const __half* p, uint32_t (&out)[4]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
}

}  // namespace awq

