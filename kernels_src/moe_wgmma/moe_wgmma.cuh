#pragma once
// The grouped expert GEMMs of a MoE layer on Hopper's warpgroup tensor cores (sm_90a), every expert's weights
// in the frag layout (frag_layout.h), one expert after another in each array. It is the dense Hopper GEMM's
// main loop (frag_wgmma_gemm.cuh: y^T = W^T x^T, the weights dequantized into wgmma's register A operand, x
// staged by cp.async into a 128B-swizzled ring) with the grouped GEMM's rows and experts (moe_grouped.cuh):
// the routed rows i = t * top_k + j arrive grouped by expert, padded to blocks of BM slots by moe_place_kernel
// (sorted[slot] = i, or `count` in padding; block_expert[b]). Block (x, y, z) computes features
// [256 x, 256 x + 256) of the BM slots of block y against that block's expert, over the z-th share of K:
//   y[i][n] = sum_k a[i / a_div][k] * W_e[k][n]   (a_div = top_k when a holds tokens, 1 when routed rows)
// and, FUSED, h[i][n] = silu(gate) * up: both matrices in the same main loop (two A operands, one x stage),
// so the SwiGLU pair of an output meets in the thread that holds it.
// The rows of x are gathered by the ring's copies themselves (each copy's source row is the slot's routed
// row); padding slots are zero-filled and never stored. Split along K (gridDim.z > 1): fp32 partials in
// ws[z][mat][count][N], summed by the grouped families' reduction launch (splitk_reduce_kernel, or
// gate_up_reduce_kernel with SwiGLU), as moe_grouped.cuh does; or (CS > 1) the CS blocks of a split form one
// thread block cluster that sums its partial tiles in distributed shared memory (frag_wgmma_gemm.cuh's
// cluster_reduce), SwiGLU applied where the sums meet: no workspace and no reduction launch.
#include "kernels_src/fraglinear/frag_layout_map.h"
#include "kernels_src/fraglinear/frag_wgmma_gemm.cuh"
#include "kernels_src/gate_up/gate_up_common.cuh"
#include "kernels_src/moe/moe_routing.cuh"  // moe_place_kernel: the block alignment each plan starts with
#include "kernels_src/common/splitk.cuh"     // splitk_reduce_kernel

template <int BITS, int FUSED, int BM, int WG, int STAGES, int PF, int KIF, int CS>
__global__ void __launch_bounds__(WG * 128, 1)
    moe_wgmma_kernel(const __half* a, const int* sorted, const int* block_expert, const int* total,
                     const uint32_t* gq, const __half* gs, const uint32_t* gz, const uint32_t* uq, const __half* us,
                     const uint32_t* uz, __half* y, float* ws, int count, int a_div, int N, int K, int G) {
  qt::grid_dependency_entry();
  using namespace frag_wgmma;
  constexpr int J = 4 / WG, MATS = FUSED ? 2 : 1;
  QT_DYNAMIC_SHARED(smem, unsigned char);
  QT_SHARED(rows, int[BM]);  // routed row of each slot, -1 for padding
  const int slot0 = blockIdx.y * BM;
  if (slot0 >= total[0]) return;  // uniform over the block: past the last expert's padded rows
  const int e = block_expert[blockIdx.y];
  for (int r = threadIdx.x; r < BM; r += WG * 128) {
    const int i = sorted[slot0 + r];
    rows[r] = i < count ? i : -1;
  }
  __syncthreads();

  // One expert's share of each frag array.
  const int64_t q_words = frag_map::weight_words(BITS, N, K), s_halves = frag_map::scale_halves(N, K, G);
  const int64_t z_words = frag_map::zero_words(BITS, N, K, G);
  FragMatrix w[MATS];
  w[0] = {gq + e * q_words, gs + e * s_halves, BITS == 4 ? gz + e * z_words : nullptr};
  if (FUSED) w[MATS - 1] = {uq + e * q_words, us + e * s_halves, BITS == 4 ? uz + e * z_words : nullptr};

  float acc[MATS][J][BM / 2];
  mainloop<BITS, BM, WG, STAGES, PF, KIF, MATS>([&](int r) { return rows[r] >= 0 ? rows[r] / a_div * K : -1; }, a, w,
                                           blockIdx.x, grid_split(K), N, K, G, smem, acc);

  const int n0 = blockIdx.x * kTiles * 64;
  if constexpr (CS > 1) {
    cluster_reduce<BM, WG, CS, MATS>(acc, smem, [&](int r, int c, const float (&sums)[MATS][4]) {
      const int row = rows[r];
      if (row < 0) return;
      for (int e = 0; e < 4 && n0 + c + e < N; ++e)
        y[(int64_t)row * N + n0 + c + e] =
            FUSED ? gate_up_swiglu(sums[0][e], sums[MATS - 1][e]) : __float2half_rn(sums[0][e]);
    });
    return;
  }
  const int64_t plane = (int64_t)count * N;
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) {
      const int col = n0 + acc_feature<WG>(j, i), row = rows[acc_row(i)];
      if (row < 0 || col >= N) continue;
      const int64_t at = (int64_t)row * N + col;
      if (gridDim.z == 1) {
        y[at] = FUSED ? gate_up_swiglu(acc[0][j][i], acc[MATS - 1][j][i]) : __float2half_rn(acc[0][j][i]);
      } else {
#pragma unroll
        for (int m = 0; m < MATS; ++m) ws[((int64_t)blockIdx.z * MATS + m) * plane + at] = acc[m][j][i];
      }
    }
}
