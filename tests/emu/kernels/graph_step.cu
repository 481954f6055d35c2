#include "kernels_src/common/qt_cuda.h"

// A tiny stand-in for a decode step, for graph capture tests (tests/emu/graph_step_check.h).

// x = mul * x + add
__global__ void k_affine(int* x, int n, int mul, int add) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * mul + add;
}

// x += *step: the step is read from device memory, which the host rewrites between replays.
__global__ void k_add_step(int* x, const int* step, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += step[0];
}

// y += x
__global__ void k_accumulate(int* y, const int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}
