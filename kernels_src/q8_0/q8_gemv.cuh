#pragma once
// Decode GEMV for Q8_0: y[M][N] = x[M][K] * W^T, W int8 [N][K] row-major with one fp32 scale per G consecutive
// elements of a row, M <= 8.
// Block: WARPS warps, each owning RW consecutive output rows (the block covers WARPS * RW rows). The lanes of a
// warp stride along K in vectors of VEC bytes, so one row's weight load by a warp is 32 * VEC contiguous bytes,
// and the RW loads of a step are independent (memory-level parallelism). x is read as VEC fp16 per lane and
// row of M, reused for all RW rows. G % VEC == 0 keeps a lane's vector inside one group: its dot product is
// scaled once per vector. fp32 accumulation; each (m, row) is reduced across the warp with shuffles.
// blockIdx.y selects MT rows of M, blockIdx.z a contiguous range of K vectors (split-k): split == 1 writes
// fp16 y, otherwise fp32 partials into ws[split][M][N] for splitk_reduce_kernel (kernels_src/common/splitk.cuh).
#include "kernels_src/q8_0/q8_common.cuh"

template <int WARPS, int RW, int VEC, int MT>
__global__ void __launch_bounds__(WARPS * 32)
    q8_gemv_kernel(const __half* x, const int8_t* q, const float* scales, __half* y, float* ws, int M, int N, int K,
                   int G) {
  qt::grid_dependency_entry();
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int n0 = (blockIdx.x * WARPS + warp) * RW;
  const int m0 = blockIdx.y * MT;
  const int vectors = K / VEC;
  const int per_split = (vectors + (int)gridDim.z - 1) / (int)gridDim.z;
  const int v_begin = min(vectors, (int)blockIdx.z * per_split);
  const int v_end = min(vectors, v_begin + per_split);
  const int groups_per_row = K / G;

  float acc[MT][RW];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < RW; ++r) acc[m][r] = 0.0f;

  if (n0 < N) {  // uniform over the warp: the shuffles below see every lane
    for (int v = v_begin + lane; v < v_end; v += 32) {
      const int k = v * VEC;
      uint32_t w[RW][VEC / 4];
      float s[RW];
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const int n = min(n0 + r, N - 1);  // rows past N compute a copy of row N-1 and are never written
        q8::load_bytes<VEC>(q + (int64_t)n * K + k, w[r]);
        s[r] = scales[(int64_t)n * groups_per_row + k / G];
      }
      uint32_t xh[MT][VEC / 2];
#pragma unroll
      for (int m = 0; m < MT; ++m)  // rows past M compute a copy of row M-1 and are never written
        q8::load_halves<VEC>(x + (int64_t)min(m0 + m, M - 1) * K + k, xh[m]);
      float dot[MT][RW];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int r = 0; r < RW; ++r) dot[m][r] = 0.0f;
#pragma unroll
      for (int j = 0; j < VEC / 4; ++j) {
        float wf[RW][4];
#pragma unroll
        for (int r = 0; r < RW; ++r) q8::s8x4_to_f32(w[r][j], wf[r]);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float x0 = q8::lo_f32(xh[m][2 * j]), x1 = q8::hi_f32(xh[m][2 * j]);
          const float x2 = q8::lo_f32(xh[m][2 * j + 1]), x3 = q8::hi_f32(xh[m][2 * j + 1]);
#pragma unroll
          for (int r = 0; r < RW; ++r)
            dot[m][r] += x0 * wf[r][0] + x1 * wf[r][1] + x2 * wf[r][2] + x3 * wf[r][3];
        }
      }
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int r = 0; r < RW; ++r) acc[m][r] += dot[m][r] * s[r];
    }

#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], o);

    // Every lane holds every sum; lane (m * RW + r) % 32 writes it, spreading the stores.
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const int row = m0 + m, n = n0 + r;
        if (lane == (m * RW + r) % 32 && row < M && n < N) {
          if (gridDim.z == 1) y[(int64_t)row * N + n] = __float2half_rn(acc[m][r]);
          else ws[((int64_t)blockIdx.z * M + row) * N + n] = acc[m][r];
        }
      }
  }
}
