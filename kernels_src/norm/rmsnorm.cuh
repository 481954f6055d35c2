#pragma once
// RMSNorm of one row per block, with the residual add fused: when `residual` is set, x = fp16(x + r) is
// written back first (the updated hidden state), then y = fp16(w * x / sqrt(mean(x^2) + eps)) with the
// statistics in fp32 over the fp16-rounded x. Thread t takes VEC consecutive elements at t*VEC, stepping by
// THREADS*VEC; the second pass re-reads the x it wrote itself (an L1/L2 hit), so rows of any length fit.
// `r` is never read when `residual` is 0 (the backend passes a null pointer).
#include "kernels_src/common/qt_vec.h"

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    rmsnorm_kernel(__half* __restrict__ x, const __half* __restrict__ r, const float* __restrict__ w,
                   __half* __restrict__ y, int N, int residual, float eps) {
  qt::grid_dependency_entry();
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, at most 1024 threads");
  const int64_t row = (int64_t)blockIdx.x * N;
  float ss = 0.0f;
  for (int c = threadIdx.x * VEC; c < N; c += THREADS * VEC) {
    float v[VEC];
    qt::load_f16<VEC>(x + row + c, v);
    if (residual) {
      float add[VEC];
      qt::load_f16<VEC>(r + row + c, add);
      // fp16(fp32(a + b)) is the correctly rounded fp16 sum (fp32 has more than 2*11+2 bits), as on the host.
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = __half2float(__float2half_rn(v[j] + add[j]));
      qt::store_f16<VEC>(x + row + c, v);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) ss += v[j] * v[j];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  QT_SHARED(warp_ss, float[THREADS / 32]);
  if ((threadIdx.x & 31) == 0) warp_ss[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < THREADS / 32; ++i) total += warp_ss[i];
  const float inv = rsqrtf(total / (float)N + eps);

  for (int c = threadIdx.x * VEC; c < N; c += THREADS * VEC) {
    float v[VEC], out[VEC];
    uint32_t wbits[VEC];
    qt::load_f16<VEC>(x + row + c, v);
    qt::load_words<VEC>(w + c, wbits);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = __uint_as_float(wbits[j]) * (v[j] * inv);
    qt::store_f16<VEC>(y + row + c, out);
  }
}
