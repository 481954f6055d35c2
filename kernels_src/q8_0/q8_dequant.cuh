#pragma once
// Q8_0 weights (q int8 [N][K], fp32 scales per group of G along K) -> fp16 W[N][K], for the dequant +
// cuBLASLt path: the file layout is already the GEMM's [N][K], so each thread turns VEC consecutive codes
// into VEC halves with one load and VEC / 8 16-byte stores. Bit-exact with the reference: fp16(q * s), the
// fp32 product rounded once to fp16.
#include "kernels_src/q8_0/q8_common.cuh"

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    q8_dequant_kernel(const int8_t* q, const float* scales, __half* w, int N, int K, int G) {
  qt::grid_dependency_entry();
  static_assert(VEC == 8 || VEC == 16, "whole 16-byte stores");
  const int64_t first = ((int64_t)blockIdx.x * THREADS + threadIdx.x) * VEC;
  if (first >= (int64_t)N * K) return;
  uint32_t codes[VEC / 4];
  q8::load_bytes<VEC>(q + first, codes);
  uint32_t out[VEC / 2];
#pragma unroll
  for (int i = 0; i < VEC / 4; ++i) {
    float f[4];
    q8::s8x4_to_f32(codes[i], f);
    // A group may end inside the vector (G is any divisor of K), so each element finds its own scale.
    float v[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) v[b] = f[b] * scales[(first + 4 * i + b) / G];
    out[2 * i] = qt::cvt_f16x2(v[0], v[1]);
    out[2 * i + 1] = qt::cvt_f16x2(v[2], v[3]);
  }
#pragma unroll
  for (int i = 0; i < VEC / 8; ++i)
    reinterpret_cast<uint4*>(w + first)[i] = make_uint4(out[4 * i], out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]);
}
