#pragma once
// dst = src over N 16-byte vectors: the copy whose time gives a report's measured DRAM bandwidth (bytes read
// plus bytes written). Each thread moves UNROLL vectors THREADS * gridDim apart, so a block's loads are
// coalesced and every thread has UNROLL independent loads in flight before its first store.
#include "kernels_src/common/qt_cuda.h"

template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS)
    mem_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  qt::grid_dependency_entry();
  const int64_t stride = (int64_t)gridDim.x * THREADS;
  const int64_t first = (int64_t)blockIdx.x * THREADS + threadIdx.x;
  for (int64_t base = first; base < n; base += stride * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t i = base + u * stride;
      if (i < n) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t i = base + u * stride;
      if (i < n) dst[i] = v[u];
    }
  }
}
