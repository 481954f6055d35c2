#include "kernels_src/common/qt_cuda.h"

// Sum of n floats per block: warp shuffles, then one value per warp through static shared memory.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  qt::grid_dependency_entry();
  QT_SHARED(warp_sums, float[kThreads / 32]);
  float v = 0.0f;
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) v += x[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) atomicAdd(out, v);
  }
}
