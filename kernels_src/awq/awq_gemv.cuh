#pragma once
// Decode GEMV for AWQ INT4: y[M][N] = x[M][K] * W, M <= 8.
// Block: WARPS warps; lane l of every warp owns packed words j0..j0+VEC-1 (8*VEC output columns) of the
// block's 256*VEC columns, so a warp's weight load of one row is 128*VEC contiguous bytes. Warp w takes
// rows k = w, w + WARPS, ... of the block's K range; blockIdx.z selects the K range (split-k, whole groups).
// blockIdx.y selects MT rows of M. fp32 accumulation; warps are reduced through shared memory, one M row
// at a time. split == 1 writes fp16 y, otherwise fp32 partials into ws[split][M][N] for
// splitk_reduce_kernel (kernels_src/common/splitk.cuh).
#include "kernels_src/awq/awq_common.cuh"

template <int WARPS, int VEC, int MT>
__global__ void __launch_bounds__(WARPS * 32)
    awq_gemv_kernel(const __half* x, const uint32_t* qweight, const uint32_t* qzeros, const __half* scales, __half* y,
                    float* ws, int M, int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int COLS = 256 * VEC;  // output columns per block
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int words = N / 8;
  const int j0 = (blockIdx.x * 32 + lane) * VEC;
  const int m0 = blockIdx.y * MT;
  const int groups = K / G;
  const int per_split = (groups + (int)gridDim.z - 1) / (int)gridDim.z;
  const int k_begin = min(groups, (int)blockIdx.z * per_split) * G;
  const int k_end = min(groups, ((int)blockIdx.z + 1) * per_split) * G;

  float acc[MT][8 * VEC];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int c = 0; c < 8 * VEC; ++c) acc[m][c] = 0.0f;

  if (j0 < words) {
    int cur_group = -1;
    uint32_t zero[VEC][4], scale[VEC][4];
    for (int k = k_begin + warp; k < k_end; k += WARPS) {
      const int g = k / G;
      if (g != cur_group) {
        cur_group = g;
        uint32_t zw[VEC];
        awq::load_words<VEC>(qzeros + (int64_t)g * words + j0, zw);
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          awq::unpack_f16x8(zw[v], zero[v]);
          awq::load_f16x8(scales + (int64_t)g * N + (j0 + v) * 8, scale[v]);
        }
      }
      uint32_t qw[VEC];
      awq::load_words<VEC>(qweight + (int64_t)k * words + j0, qw);
      float xv[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) xv[m] = (m0 + m < M) ? __half2float(x[(int64_t)(m0 + m) * K + k]) : 0.0f;
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        uint32_t w[4];
        awq::dequant_f16x8(qw[v], zero[v], scale[v], w);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float lo = awq::lo_f32(w[i]), hi = awq::hi_f32(w[i]);
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            acc[m][v * 8 + 2 * i] += xv[m] * lo;
            acc[m][v * 8 + 2 * i + 1] += xv[m] * hi;
          }
        }
      }
    }
  }

  QT_SHARED(red, float[WARPS][COLS]);
  const int col0 = blockIdx.x * COLS;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if (m0 + m < M) {  // uniform over the block: every thread reaches both barriers or none
#pragma unroll
      for (int c = 0; c < 8 * VEC; ++c) red[warp][lane * 8 * VEC + c] = acc[m][c];
      __syncthreads();
      for (int t = threadIdx.x; t < COLS; t += WARPS * 32) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) sum += red[w][t];
        const int col = col0 + t;
        if (col < N) {
          if (gridDim.z == 1) y[(int64_t)(m0 + m) * N + col] = __float2half_rn(sum);
          else ws[((int64_t)blockIdx.z * M + m0 + m) * N + col] = sum;
        }
      }
      __syncthreads();
    }
  }
}
