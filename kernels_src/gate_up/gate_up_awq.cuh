#pragma once
// Fused MLP front for decode, AWQ INT4 weights: h[m][n] = fp16(silu(x·Wg[:,n]) * (x·Wu[:,n])), M <= 8.
// The frame is awq_gemv's (kernels_src/awq): lane l of every warp owns packed words j0..j0+VEC-1 (8*VEC
// columns) of the block's 256*VEC columns of both matrices; warp w takes rows k = w, w + WARPS, ... of the
// block's K range; blockIdx.z selects whole groups along K (split-k); blockIdx.y MT rows of M. Dequant
// (q - z) * s in f16x2 by the AWQ helpers, fp32 accumulation. The warps' partial sums meet in shared
// memory, gate then up through one buffer; split == 1 applies silu and writes h, else fp32 partials go to
// ws[split][2][M][N] for gate_up_reduce_kernel.
#include "kernels_src/awq/awq_common.cuh"
#include "kernels_src/gate_up/gate_up_common.cuh"

// One matrix's share of a lane: the current group's unpacked zeros and scales, and the accumulators.
template <int VEC, int MT>
struct GateUpAwqLane {
  uint32_t zero[VEC][4], scale[VEC][4];
  float acc[MT][8 * VEC];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int c = 0; c < 8 * VEC; ++c) acc[m][c] = 0.0f;
  }

  __device__ __forceinline__ void load_group(const uint32_t* qzeros, const __half* scales, int g, int words, int N,
                                             int j0) {
    uint32_t zw[VEC];
    awq::load_words<VEC>(qzeros + (int64_t)g * words + j0, zw);
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      awq::unpack_f16x8(zw[v], zero[v]);
      awq::load_f16x8(scales + (int64_t)g * N + (j0 + v) * 8, scale[v]);
    }
  }

  __device__ __forceinline__ void accumulate(const uint32_t* qweight, int k, int words, int j0, const float (&xv)[MT]) {
    uint32_t qw[VEC];
    awq::load_words<VEC>(qweight + (int64_t)k * words + j0, qw);
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
};

template <int WARPS, int VEC, int MT>
__global__ void __launch_bounds__(WARPS * 32)
    gate_up_awq_kernel(const __half* __restrict__ x, const uint32_t* __restrict__ gate_qweight,
                       const uint32_t* __restrict__ gate_qzeros, const __half* __restrict__ gate_scales,
                       const uint32_t* __restrict__ up_qweight, const uint32_t* __restrict__ up_qzeros,
                       const __half* __restrict__ up_scales, __half* __restrict__ h, float* __restrict__ ws, int M,
                       int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int THREADS = WARPS * 32;
  constexpr int COLS = 256 * VEC;            // output columns per block
  constexpr int PER_THREAD = COLS / THREADS;  // columns each thread sums in the reduction
  static_assert(COLS % THREADS == 0, "the block's columns split evenly over its threads");
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int words = N / 8;
  const int j0 = (blockIdx.x * 32 + lane) * VEC;
  const int m0 = blockIdx.y * MT;
  const int groups = K / G;
  const int per_split = (groups + (int)gridDim.z - 1) / (int)gridDim.z;
  const int k_begin = min(groups, (int)blockIdx.z * per_split) * G;
  const int k_end = min(groups, ((int)blockIdx.z + 1) * per_split) * G;

  GateUpAwqLane<VEC, MT> gate, up;
  gate.clear();
  up.clear();
  if (j0 < words) {
    int cur_group = -1;
    for (int k = k_begin + warp; k < k_end; k += WARPS) {
      const int g = k / G;
      if (g != cur_group) {
        cur_group = g;
        gate.load_group(gate_qzeros, gate_scales, g, words, N, j0);
        up.load_group(up_qzeros, up_scales, g, words, N, j0);
      }
      float xv[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) xv[m] = (m0 + m < M) ? __half2float(x[(int64_t)(m0 + m) * K + k]) : 0.0f;
      gate.accumulate(gate_qweight, k, words, j0, xv);
      up.accumulate(up_qweight, k, words, j0, xv);
    }
  }

  QT_SHARED(red, float[WARPS][COLS]);
  const int col0 = blockIdx.x * COLS;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if (m0 + m < M) {  // uniform over the block: every thread reaches all four barriers or none
      float gsum[PER_THREAD];
#pragma unroll
      for (int c = 0; c < 8 * VEC; ++c) red[warp][lane * 8 * VEC + c] = gate.acc[m][c];
      __syncthreads();
#pragma unroll
      for (int i = 0; i < PER_THREAD; ++i) {
        gsum[i] = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) gsum[i] += red[w][threadIdx.x + i * THREADS];
      }
      __syncthreads();
#pragma unroll
      for (int c = 0; c < 8 * VEC; ++c) red[warp][lane * 8 * VEC + c] = up.acc[m][c];
      __syncthreads();
#pragma unroll
      for (int i = 0; i < PER_THREAD; ++i) {
        float usum = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) usum += red[w][threadIdx.x + i * THREADS];
        const int col = col0 + threadIdx.x + i * THREADS;
        if (col < N) {
          const int64_t o = (int64_t)(m0 + m) * N + col;
          if (gridDim.z == 1) {
            h[o] = gate_up_swiglu(gsum[i], usum);
          } else {
            ws[(int64_t)(2 * blockIdx.z) * M * N + o] = gsum[i];
            ws[(int64_t)(2 * blockIdx.z + 1) * M * N + o] = usum;
          }
        }
      }
      __syncthreads();
    }
  }
}
