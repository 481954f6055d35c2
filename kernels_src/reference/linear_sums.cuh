// The reference of a linear family's large shapes, on the device: y = a w, abs = |a| |w| and g_abs = g |w|
// (kernels_src/registry/family.h, LinearOperands), each summed in double and rounded once to fp32, as
// cpu_linear_sums does on the CPU. fp32 operands multiply exactly in double, so the sums differ from the CPU's
// only in the order of their double additions. Plain tiles on purpose: this kernel is the judge of the fast
// ones, so it must be obviously right, and it runs once per tuning job.
#include "kernels_src/common/qt_cuda.h"

template <int kTile>
__global__ void __launch_bounds__(kTile * kTile)
    linear_sums_kernel(const float* __restrict__ a, const float* __restrict__ w, const float* __restrict__ g,
                       float* __restrict__ y, float* __restrict__ abs_y, float* __restrict__ g_abs, int m, int n,
                       int k) {
  qt::grid_dependency_entry();
  QT_SHARED(a_tile, float[kTile][kTile + 1]);
  QT_SHARED(g_tile, float[kTile][kTile + 1]);
  QT_SHARED(w_tile, float[kTile][kTile + 1]);
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  double sum = 0.0, abs_sum = 0.0, g_sum = 0.0;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    const bool a_in = row < m && k0 + tx < k;
    a_tile[ty][tx] = a_in ? a[int64_t(row) * k + k0 + tx] : 0.0f;
    g_tile[ty][tx] = g && a_in ? g[int64_t(row) * k + k0 + tx] : 0.0f;
    w_tile[ty][tx] = k0 + ty < k && col < n ? w[int64_t(k0 + ty) * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < kTile; ++i) {
      const double p = double(a_tile[ty][i]) * double(w_tile[i][tx]);
      const double wa = w_tile[i][tx] < 0.0f ? -double(w_tile[i][tx]) : double(w_tile[i][tx]);
      sum += p;
      abs_sum += p < 0.0 ? -p : p;
      g_sum += double(g_tile[ty][i]) * wa;
    }
    __syncthreads();
  }
  if (row < m && col < n) {
    const int64_t o = int64_t(row) * n + col;
    y[o] = float(sum);
    abs_y[o] = float(abs_sum);
    if (g_abs) g_abs[o] = float(g_sum);
  }
}
