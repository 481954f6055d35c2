#pragma once
// Shared by the fused gate+up+SwiGLU decode GEMVs: silu, the output rule h = fp16(silu(g) * u) on the fp32
// accumulations, and the split-k reduction that applies it to the partial sums.
#include "kernels_src/common/qt_cuda.h"

__device__ __forceinline__ __half gate_up_swiglu(float g, float u) {
  return __float2half_rn(g / (1.0f + expf(-g)) * u);
}

// ws holds [split][2][count] fp32 partials (gate, then up); h[i] = swiglu of the sums over splits.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    gate_up_reduce_kernel(const float* __restrict__ ws, __half* __restrict__ h, int count, int splits) {
  qt::grid_dependency_entry();
  const int i = blockIdx.x * THREADS + threadIdx.x;
  if (i >= count) return;
  float g = 0.0f, u = 0.0f;
  for (int z = 0; z < splits; ++z) {
    g += ws[(int64_t)(2 * z) * count + i];
    u += ws[(int64_t)(2 * z + 1) * count + i];
  }
  h[i] = gate_up_swiglu(g, u);
}
