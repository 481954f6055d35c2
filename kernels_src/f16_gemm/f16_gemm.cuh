#pragma once
// Tensor-core GEMM over fp16 weights: y[M][N] = x[M][K] * W^T, W fp16 [N][K] row-major ("values"), any M and N,
// K % 8 == 0 (16-byte rows of 8 halves).
//
// W's [N][K] layout is the "col" B operand of mma.row.col, so A and B are both k-contiguous fp16 rows in shared
// memory, read with non-transposed ldmatrix (A: x4 per 16-row fragment; B: x4 per pair of 8-column
// fragments). Block tile BM x BN, WARPS warps side by side along N, K in steps of BK through a STAGES-deep
// cp.async pipeline (kernels_src/common/gemm_pipeline.cuh; the stage loader below copies both operands'
// rows). Rows are padded by 8 halves so the eight
// 16-byte rows of an ldmatrix fall in distinct banks. Rows past M or N and chunks past K are zero-filled
// (src-size 0 from a valid address). Split-k: blockIdx.z takes a contiguous range of K tiles and writes fp32
// partials to ws[z][M][N] for splitk_reduce_kernel (kernels_src/common/splitk.cuh).
#include "kernels_src/common/gemm_pipeline.cuh"
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/splitk.cuh"

template <int BM, int BN, int BK, int WARPS, int STAGES>
struct F16GemmTile {
  static constexpr int THREADS = WARPS * 32;
  static constexpr int STRIDE = BK + 8;  // halves per shared row
  static constexpr int A_HALVES = BM * STRIDE;
  static constexpr int STAGE_HALVES = (BM + BN) * STRIDE;
  static constexpr int WN = BN / WARPS;
  static constexpr int NF = WN / 8;
  static constexpr int MF = BM / 16;
  static_assert(BM % 16 == 0 && BK % 16 == 0 && BN % 64 == 0, "tile shape");
  static_assert(WN % 8 == 0 && NF >= 1, "each warp needs whole 8-column fragments");
  static_assert(STAGES >= 2, "the pipeline needs two stages");

  // One operand tile: `rows` rows of BK halves from src (row-major, K per row), rows past `limit` zero.
  template <int ROWS>
  static __device__ __forceinline__ void load_rows(__half* dst, const __half* src, int r0, int limit, int k0, int K,
                                                   int tid) {
    constexpr int CHUNKS = BK / 8;
    for_each_chunk<ROWS * CHUNKS, THREADS>(tid, [&](int c) {
      const int r = c / CHUNKS, cc = c % CHUNKS;
      const int row = r0 + r, k = k0 + cc * 8;
      const bool valid = row < limit && k < K;
      const __half* s = src + (int64_t)min(row, limit - 1) * K + (valid ? k : 0);
      qt::cp_async_cg16(qt::smem_u32(dst + r * STRIDE + cc * 8), s, valid ? 16u : 0u);
    });
  }

  static __device__ __forceinline__ void mma(const __half* stage, float (&acc)[MF][NF][4], int warp, int lane) {
    mma(stage, stage + A_HALVES, acc, warp, lane);
  }
  // The same on an A tile [BM][STRIDE] and a B tile [BN][STRIDE] anywhere in shared memory.
  static __device__ __forceinline__ void mma(const __half* As, const __half* Bs, float (&acc)[MF][NF][4], int warp,
                                             int lane) {
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t a[MF][4], b[NF][2];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
        qt::ldmatrix_x4(a[mf], qt::smem_u32(As + (mf * 16 + (lane & 15)) * STRIDE + kk + (lane >> 4) * 8));
#pragma unroll
      for (int nf = 0; nf + 1 < NF; nf += 2) {
        uint32_t r[4];
        const int n = warp * WN + (nf + (lane >> 4)) * 8 + (lane & 7);
        qt::ldmatrix_x4(r, qt::smem_u32(Bs + n * STRIDE + kk + ((lane >> 3) & 1) * 8));
        b[nf][0] = r[0], b[nf][1] = r[1], b[nf + 1][0] = r[2], b[nf + 1][1] = r[3];
      }
      if constexpr (NF % 2 == 1) {
        const int n = warp * WN + (NF - 1) * 8 + (lane & 7);
        qt::ldmatrix_x2(b[NF - 1], qt::smem_u32(Bs + n * STRIDE + kk + ((lane >> 3) & 1) * 8));
      }
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) qt::mma_m16n8k16_f16(acc[mf][nf], a[mf], b[nf], acc[mf][nf]);
    }
  }
};

template <int BM, int BN, int BK, int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS * 32)
    f16_gemm_kernel(const __half* x, const __half* w, __half* y, float* ws, int M, int N, int K) {
  qt::grid_dependency_entry();
  using T = F16GemmTile<BM, BN, BK, WARPS, STAGES>;
  QT_DYNAMIC_SHARED(smem, __half);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const KTileRange range = split_k_range((K + BK - 1) / BK);
  float acc[T::MF][T::NF][4];
  zero_accumulators(acc);
  cp_async_pipeline<STAGES>(
      range.count,
      [&](int slot, int t) {
        __half* stage = smem + slot * T::STAGE_HALVES;
        const int k0 = (range.begin + t) * BK;
        T::template load_rows<BM>(stage, x, m0, M, k0, K, tid);
        T::template load_rows<BN>(stage + T::A_HALVES, w, n0, N, k0, K, tid);
      },
      [&](int slot, int) { T::mma(smem + slot * T::STAGE_HALVES, acc, warp, lane); });

  store_mma_tile<T::MF, T::NF, T::WN>(acc, y, ws, m0, n0, warp, lane, M, N);
}

