#pragma once
// Vector memory access as 32-bit words: one 4-, 8- or 16-byte access per word group, the widths a GPU
// coalesces best. Pointers must be aligned to the access size (the emulator checks). Also the fp16 / bf16
// halves of a word widened to fp32 and fp32 pairs packed back. Plain CUDA C++ over qt_cuda.h: no second half.
#include "kernels_src/common/qt_cuda.h"

namespace qt {

// W consecutive words (W = 1, 2 or a multiple of 4) with the widest accesses W allows.
template <int W>
__device__ __forceinline__ void load_words(const void* p, uint32_t (&w)[W]) {
  if constexpr (W % 4 == 0) {
#pragma unroll
    for (int i = 0; i < W / 4; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (W == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(W == 1, "load_words: W must be 1, 2 or a multiple of 4");
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
}

template <int W>
__device__ __forceinline__ void store_words(void* p, const uint32_t (&w)[W]) {
  if constexpr (W % 4 == 0) {
#pragma unroll
    for (int i = 0; i < W / 4; ++i)
      reinterpret_cast<uint4*>(p)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else if constexpr (W == 2) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
    static_assert(W == 1, "store_words: W must be 1, 2 or a multiple of 4");
    *reinterpret_cast<uint32_t*>(p) = w[0];
  }
}

__device__ __forceinline__ float f16_lo(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu))); }
__device__ __forceinline__ float f16_hi(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w >> 16))); }
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// N fp16 values (N = 1, 2, 4, 8, 16; N >= 2 needs p aligned to 2N bytes) widened to fp32.
template <int N>
__device__ __forceinline__ void load_f16(const __half* p, float (&v)[N]) {
  if constexpr (N == 1) {
    v[0] = __half2float(p[0]);
  } else {
    uint32_t w[N / 2];
    load_words<N / 2>(p, w);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) v[2 * i] = f16_lo(w[i]), v[2 * i + 1] = f16_hi(w[i]);
  }
}

// N fp32 values rounded once to fp16 and stored (same alignment rule as load_f16).
template <int N>
__device__ __forceinline__ void store_f16(__half* p, const float (&v)[N]) {
  if constexpr (N == 1) {
    p[0] = __float2half_rn(v[0]);
  } else {
    uint32_t w[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w[i] = cvt_f16x2(v[2 * i], v[2 * i + 1]);
    store_words<N / 2>(p, w);
  }
}

}  // namespace qt
