#pragma once
// Fused MLP front for decode, Q8_0 weights: h[m][n] = fp16(silu(x·Wg[n]) * (x·Wu[n])), M <= 8.
// Weights in qwen3.c's layout: q int8 [N][K] row-major, one fp32 scale per G consecutive elements of a row
// (scale index n*K/G + k/G). The frame is f16_gemv's: warp w of block x owns ROWS consecutive rows n of
// both matrices; lane l reads VEC int8 of each row at k = l*VEC, + 32*VEC, ... (VEC divides G, so one scale
// per read); blockIdx.y selects MT rows of M, whose x slices stay in registers while the ROWS rows pass;
// blockIdx.z a range of whole 32*VEC chunks of K (split-k). Weights are widened exactly (int8 -> fp32 by
// the 2^23 magic number, no conversion instruction) and scaled in fp32; fp32 accumulation reduced by warp
// shuffles. split == 1 applies silu and writes h, else fp32 partials go to ws[split][2][M][N] for
// gate_up_reduce_kernel. Warps never wait on each other: no block barrier.
#include "kernels_src/common/qt_vec.h"
#include "kernels_src/gate_up/gate_up_common.cuh"

// Byte b of a word of int8 values pre-biased by ^0x80808080, as fp32: 2^23 + (q + 128) placed in the
// mantissa, minus 2^23 + 128. Exact.
__device__ __forceinline__ float gate_up_s8_to_f32(uint32_t biased, int b) {
  return __uint_as_float(qt::prmt(biased, 0x4B000000u, 0x7440u | (uint32_t)b)) - 8388736.0f;
}

template <int VEC, int MT, int ROWS>
__device__ __forceinline__ void gate_up_q8_0_rows(const int8_t* const (&rows)[ROWS], const float* scales,
                                                  const int64_t (&scale_base)[ROWS], int k, int G,
                                                  const uint32_t (&xq)[MT][VEC / 2], float (&acc)[MT][ROWS]) {
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    uint32_t q[VEC / 4];
    qt::load_words<VEC / 4>(rows[r] + k, q);
    const float s = scales[scale_base[r] + k / G];
#pragma unroll
    for (int i = 0; i < VEC / 4; ++i) {
      const uint32_t biased = q[i] ^ 0x80808080u;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const float wv = gate_up_s8_to_f32(biased, b) * s;
        const int j = 4 * i + b;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float xv = (j & 1) ? qt::f16_hi(xq[m][j / 2]) : qt::f16_lo(xq[m][j / 2]);
          acc[m][r] = fmaf(xv, wv, acc[m][r]);
        }
      }
    }
  }
}

template <int WARPS, int ROWS, int VEC, int MT>
__global__ void __launch_bounds__(WARPS * 32)
    gate_up_q8_0_kernel(const __half* __restrict__ x, const int8_t* __restrict__ gate_q,
                        const float* __restrict__ gate_scales, const int8_t* __restrict__ up_q,
                        const float* __restrict__ up_scales, __half* __restrict__ h, float* __restrict__ ws, int M,
                        int N, int K, int G) {
  qt::grid_dependency_entry();
  static_assert(VEC == 4 || VEC == 8 || VEC == 16, "VEC int8 = one 4, 8 or 16-byte access");
  constexpr int SPAN = 32 * VEC;
  const int lane = threadIdx.x & 31;
  const int n0 = ((int)blockIdx.x * WARPS + (threadIdx.x >> 5)) * ROWS;
  if (n0 >= N) return;  // whole warps: the shuffles below see every lane of theirs
  const int m0 = blockIdx.y * MT;
  const int chunks = (K + SPAN - 1) / SPAN;
  const int per_split = (chunks + (int)gridDim.z - 1) / (int)gridDim.z;
  const int k_begin = min(K, (int)blockIdx.z * per_split * SPAN);
  const int k_end = min(K, ((int)blockIdx.z + 1) * per_split * SPAN);

  // Rows past N or M are read clamped to the last real one and never stored.
  const int8_t* grow[ROWS];
  const int8_t* urow[ROWS];
  int64_t scale_base[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int64_t n = min(n0 + r, N - 1);
    grow[r] = gate_q + n * K;
    urow[r] = up_q + n * K;
    scale_base[r] = n * (K / G);
  }
  const __half* xrow[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) xrow[m] = x + (int64_t)min(m0 + m, M - 1) * K;

  float acc_g[MT][ROWS], acc_u[MT][ROWS];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc_g[m][r] = 0.0f, acc_u[m][r] = 0.0f;

  for (int k = k_begin + lane * VEC; k < k_end; k += SPAN) {
    uint32_t xq[MT][VEC / 2];
#pragma unroll
    for (int m = 0; m < MT; ++m) qt::load_words<VEC / 2>(xrow[m] + k, xq[m]);
    gate_up_q8_0_rows<VEC, MT, ROWS>(grow, gate_scales, scale_base, k, G, xq, acc_g);
    gate_up_q8_0_rows<VEC, MT, ROWS>(urow, up_scales, scale_base, k, G, xq, acc_u);
  }

#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        acc_g[m][r] += __shfl_xor_sync(0xffffffffu, acc_g[m][r], o);
        acc_u[m][r] += __shfl_xor_sync(0xffffffffu, acc_u[m][r], o);
      }

  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        if (m0 + m >= M || n0 + r >= N) continue;
        const int64_t i = (int64_t)(m0 + m) * N + n0 + r;
        if (gridDim.z == 1) {
          h[i] = gate_up_swiglu(acc_g[m][r], acc_u[m][r]);
        } else {
          ws[(int64_t)(2 * blockIdx.z) * M * N + i] = acc_g[m][r];
          ws[(int64_t)(2 * blockIdx.z + 1) * M * N + i] = acc_u[m][r];
        }
      }
  }
}
