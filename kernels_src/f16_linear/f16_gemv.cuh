#pragma once
// Decode GEMV with fp16 weights: y[M][N] = x[M][K] * W^T, W = "values" fp16 [N][K] row-major, M <= 8.
// Warp w of block x owns ROWS consecutive output rows from n0 = (x*WARPS + w)*ROWS; a row is contiguous,
// so lane l reads VEC halves at k = l*VEC, l*VEC + 32*VEC, ... (one 4-16 byte access; a warp reads 64*VEC
// contiguous bytes per row and step). blockIdx.y selects MT rows of M, whose x slices every warp reads
// alike (L1 hits). blockIdx.z selects a range of whole 32*VEC-element chunks of K (split-k). fp32
// accumulation, reduced across the warp by shuffles. split == 1 writes fp16 y, otherwise fp32 partials
// ws[split][M][N] that splitk_reduce_kernel (kernels_src/common/splitk.cuh) sums. Warps never wait on each other: no block barrier.
#include "kernels_src/common/qt_vec.h"
#include "kernels_src/common/splitk.cuh"

template <int WARPS, int ROWS, int VEC, int MT>
__global__ void __launch_bounds__(WARPS * 32)
    f16_gemv_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y,
                    float* __restrict__ ws, int M, int N, int K) {
  qt::grid_dependency_entry();
  static_assert(VEC == 2 || VEC == 4 || VEC == 8, "VEC halves = one 4, 8 or 16-byte access");
  constexpr int SPAN = 32 * VEC;
  const int lane = threadIdx.x & 31;
  const int n0 = ((int)blockIdx.x * WARPS + (threadIdx.x >> 5)) * ROWS;
  if (n0 >= N) return;  // whole warps: the shuffles below see every lane of theirs
  const int m0 = blockIdx.y * MT;
  const int chunks = (K + SPAN - 1) / SPAN;
  const int per_split = (chunks + (int)gridDim.z - 1) / (int)gridDim.z;
  const int k_begin = min(K, (int)blockIdx.z * per_split * SPAN);
  const int k_end = min(K, ((int)blockIdx.z + 1) * per_split * SPAN);

  // Rows past N or M are read clamped to the last real one and never stored. The pointers advance with k
  // (fewer live 64-bit offsets: computing wrow[r] + k afresh made ptxas spill at rows=2).
  const __half* wrow[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) wrow[r] = w + (int64_t)min(n0 + r, N - 1) * K + k_begin + lane * VEC;
  const __half* xrow[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) xrow[m] = x + (int64_t)min(m0 + m, M - 1) * K + k_begin + lane * VEC;

  float acc[MT][ROWS];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[m][r] = 0.0f;

  for (int k = k_begin + lane * VEC; k < k_end; k += SPAN) {
    uint32_t wq[ROWS][VEC / 2];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) qt::load_words<VEC / 2>(wrow[r], wq[r]), wrow[r] += SPAN;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      uint32_t xq[VEC / 2];
      qt::load_words<VEC / 2>(xrow[m], xq);
      xrow[m] += SPAN;
#pragma unroll
      for (int i = 0; i < VEC / 2; ++i) {
        const float x0 = qt::f16_lo(xq[i]), x1 = qt::f16_hi(xq[i]);
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          acc[m][r] = fmaf(x0, qt::f16_lo(wq[r][i]), acc[m][r]);
          acc[m][r] = fmaf(x1, qt::f16_hi(wq[r][i]), acc[m][r]);
        }
      }
    }
  }

#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], o);

  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        if (m0 + m >= M || n0 + r >= N) continue;
        const int64_t i = (int64_t)(m0 + m) * N + n0 + r;
        if (gridDim.z == 1) y[i] = __float2half_rn(acc[m][r]);
        else ws[(int64_t)blockIdx.z * M * N + i] = acc[m][r];
      }
  }
}

