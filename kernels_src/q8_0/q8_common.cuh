#pragma once
// Device helpers shared by the Q8_0 kernels: exact int8 -> fp32 / fp16 conversions with byte permutes and
// magic-number floats (cheaper than I2F, which issues at a quarter of the FP32 rate), round-to-nearest-even,
// and the split-k reduction. Written against kernels_src/common/qt_cuda.h so the same text compiles with
// NVRTC and in the emulator.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/splitk.cuh"

namespace q8 {

// The four signed bytes of `w` as exact floats: byte b, biased to b + 128 by flipping its sign bit, becomes the
// mantissa of 2^23 (0x4B0000xx = 8388608 + b + 128); subtracting 8388736 leaves b.
__device__ __forceinline__ void s8x4_to_f32(uint32_t w, float (&f)[4]) {
  const uint32_t u = w ^ 0x80808080u;
  f[0] = __uint_as_float(qt::prmt(u, 0x4B000000u, 0x7540u)) - 8388736.0f;
  f[1] = __uint_as_float(qt::prmt(u, 0x4B000000u, 0x7541u)) - 8388736.0f;
  f[2] = __uint_as_float(qt::prmt(u, 0x4B000000u, 0x7542u)) - 8388736.0f;
  f[3] = __uint_as_float(qt::prmt(u, 0x4B000000u, 0x7543u)) - 8388736.0f;
}

// Two fp16 values packed in a word, widened to fp32.
__device__ __forceinline__ float lo_f32(uint32_t h2) {
  return __half2float(__ushort_as_half((unsigned short)(h2 & 0xffffu)));
}
__device__ __forceinline__ float hi_f32(uint32_t h2) { return __half2float(__ushort_as_half((unsigned short)(h2 >> 16))); }

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves no fraction bits in the sum.
__device__ __forceinline__ int round_even(float v) {
  const float r = (v + 12582912.0f) - 12582912.0f;
  return (int)r;
}

// N consecutive bytes (N = 4, 8, 16; p aligned to N) as N/4 words with one vector load.
template <int N>
__device__ __forceinline__ void load_bytes(const int8_t* p, uint32_t (&out)[N / 4]) {
  if constexpr (N == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else if constexpr (N == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    out[0] = v.x, out[1] = v.y;
  } else {
    static_assert(N == 4, "4, 8 or 16 bytes");
    out[0] = *reinterpret_cast<const uint32_t*>(p);
  }
}

// N consecutive fp16 values (N = 4, 8, 16; p aligned to 2N bytes) as N/2 packed words.
template <int N>
__device__ __forceinline__ void load_halves(const __half* p, uint32_t (&out)[N / 2]) {
  if constexpr (N == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    out[0] = v.x, out[1] = v.y;
  } else {
    static_assert(N % 8 == 0, "4, 8 or 16 halves");
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      out[4 * i] = v.x, out[4 * i + 1] = v.y, out[4 * i + 2] = v.z, out[4 * i + 3] = v.w;
    }
  }
}

}  // namespace q8

