#pragma once
// SwiGLU of the MLP: h = fp16(silu(gate) * up), silu(g) = g / (1 + exp(-g)), all in fp32 on the widened fp16
// inputs. The [M][N] arrays are treated as one flat run of count = M*N elements: thread i takes VEC
// consecutive elements with one 4-16 byte access per array; the last thread of the run takes the tail one
// element at a time.
#include "kernels_src/common/qt_vec.h"

__device__ __forceinline__ float swiglu_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    swiglu_kernel(const __half* __restrict__ gate, const __half* __restrict__ up, __half* __restrict__ h, int64_t count) {
  qt::grid_dependency_entry();
  const int64_t i = ((int64_t)blockIdx.x * THREADS + threadIdx.x) * VEC;
  if (i >= count) return;
  if (i + VEC <= count) {
    float g[VEC], u[VEC], r[VEC];
    qt::load_f16<VEC>(gate + i, g);
    qt::load_f16<VEC>(up + i, u);
#pragma unroll
    for (int j = 0; j < VEC; ++j) r[j] = swiglu_silu_mul(g[j], u[j]);
    qt::store_f16<VEC>(h + i, r);
  } else {
    for (int64_t j = i; j < count; ++j)
      h[j] = __float2half_rn(swiglu_silu_mul(__half2float(gate[j]), __half2float(up[j])));
  }
}
