#pragma once
// Prefill GEMM for AWQ INT4 on tensor cores: y[M][N] = x[M][K] * W, any M, N % BN == 0, G % BK == 0.
//
// Block tile BM x BN, K in steps of BK, WARPS warps side by side along N (each BM x BN/WARPS).
// Shared memory (dynamic), per pipeline stage: the A tile (fp16, rows padded by 8 halves so ldmatrix rows
// fall in different banks), the packed B tile (BK x BN/8 words), the tile's scale row and packed zero row
// (one group per tile since G % BK == 0). All of it arrives by cp.async (16 bytes; A rows past M are
// zero-filled with src-size 0). After a stage lands, the block dequantizes its packed B into one fp16
// tile Bs [BK][BN+8] with the LOP3 magic-number unpack, then each warp runs ldmatrix.x4 (A) /
// ldmatrix.x2.trans (B) and mma.m16n8k16 with fp32 accumulators.
//
// Pipeline (STAGES >= 2): kernels_src/common/gemm_pipeline.cuh, with this kernel's stage loader; its barrier
// publishes tile t and retires the stage being refilled and Bs; a second one here publishes Bs.
// Split-k: blockIdx.z takes a contiguous range of K tiles and writes fp32 partials to ws[z][M][N].
#include "kernels_src/awq/awq_common.cuh"
#include "kernels_src/common/gemm_pipeline.cuh"

template <int BM, int BN, int BK, int WARPS, int STAGES>
struct AwqGemmTile {
  static constexpr int THREADS = WARPS * 32;
  static constexpr int AS = BK + 8;  // A row stride, halves
  static constexpr int BS = BN + 8;  // dequantized B row stride, halves
  static constexpr int BW = BN / 8;  // packed words per B row
  static constexpr int A_BYTES = BM * AS * 2;
  static constexpr int BQ_BYTES = BK * BW * 4;
  static constexpr int S_BYTES = BN * 2;
  static constexpr int Z_BYTES = BW * 4;
  static constexpr int STAGE_BYTES = A_BYTES + BQ_BYTES + S_BYTES + Z_BYTES;
  static constexpr int WN = BN / WARPS;  // columns per warp
  static constexpr int NF = WN / 8;      // n fragments per warp
  static constexpr int MF = BM / 16;     // m fragments per warp
  static_assert(BM % 16 == 0 && BK % 16 == 0 && BN % 64 == 0, "tile shape");
  static_assert(WN % 8 == 0 && NF >= 1, "each warp needs whole 8-column fragments");
  static_assert(STAGES >= 2, "the pipeline needs two stages");

  // Issues the cp.async copies of K tile `kt` into stage buffer `base`.
  static __device__ __forceinline__ void load(unsigned char* base, const __half* x, const uint32_t* qweight,
                                              const uint32_t* qzeros, const __half* scales, int kt, int m0, int n0,
                                              int M, int N, int K, int G, int tid) {
    const int k0 = kt * BK;
    const int words = N / 8;
    for_each_chunk<BM * BK / 8, THREADS>(tid, [&](int c) {
      const int r = c / (BK / 8), c8 = c % (BK / 8);
      const int row = m0 + r;
      const __half* src = x + (int64_t)min(row, M - 1) * K + k0 + c8 * 8;  // a valid address even when zero-filling
      qt::cp_async_cg16(qt::smem_u32(base + (r * AS + c8 * 8) * 2), src, row < M ? 16u : 0u);
    });
    for_each_chunk<BK * BW / 4, THREADS>(tid, [&](int c) {
      const int r = c / (BW / 4), c4 = c % (BW / 4);
      const uint32_t* src = qweight + (int64_t)(k0 + r) * words + n0 / 8 + c4 * 4;
      qt::cp_async_cg16(qt::smem_u32(base + A_BYTES + (r * BW + c4 * 4) * 4), src);
    });
    const int g = k0 / G;
    constexpr int S_CHUNKS = BN / 8, Z_CHUNKS = BW / 4;
    for_each_chunk<S_CHUNKS + Z_CHUNKS, THREADS>(tid, [&](int c) {
      if (c < S_CHUNKS) {
        qt::cp_async_cg16(qt::smem_u32(base + A_BYTES + BQ_BYTES + c * 16), scales + (int64_t)g * N + n0 + c * 8);
      } else {
        const int cz = c - S_CHUNKS;
        qt::cp_async_cg16(qt::smem_u32(base + A_BYTES + BQ_BYTES + S_BYTES + cz * 16),
                          qzeros + (int64_t)g * words + n0 / 8 + cz * 4);
      }
    });
  }

  // Packed B of stage `base` -> fp16 Bs[BK][BS]. THREADS is a multiple of a row's BW words, so every word a
  // thread dequantizes is in its one column of words: its zeros and scales are read and unpacked once a tile.
  static_assert(THREADS % BW == 0, "a thread's packed words share their column");
  static __device__ __forceinline__ void dequant(const unsigned char* base, __half* Bs, int tid) {
    const uint32_t* bq = reinterpret_cast<const uint32_t*>(base + A_BYTES);
    const __half* ss = reinterpret_cast<const __half*>(base + A_BYTES + BQ_BYTES);
    const uint32_t* zs = reinterpret_cast<const uint32_t*>(base + A_BYTES + BQ_BYTES + S_BYTES);
    const int jw = tid % BW;
    uint32_t zero[4], s[4];
    awq::unpack_f16x8(zs[jw], zero);
    awq::load_f16x8(ss + jw * 8, s);
    for_each_chunk<BK * BW, THREADS>(tid, [&](int i) {
      uint32_t w[4];
      awq::dequant_f16x8(bq[i], zero, s, w);
      *reinterpret_cast<uint4*>(Bs + (i / BW) * BS + jw * 8) = make_uint4(w[0], w[1], w[2], w[3]);
    });
  }

  static __device__ __forceinline__ void mma(const unsigned char* base, const __half* Bs, float (&acc)[MF][NF][4],
                                             int warp, int lane) {
    const __half* As = reinterpret_cast<const __half*>(base);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t a[MF][4], b[NF][2];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
        qt::ldmatrix_x4(a[mf], qt::smem_u32(As + (mf * 16 + (lane & 15)) * AS + kk + (lane >> 4) * 8));
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
        qt::ldmatrix_x2_trans(b[nf], qt::smem_u32(Bs + (kk + (lane & 15)) * BS + warp * WN + nf * 8));
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) qt::mma_m16n8k16_f16(acc[mf][nf], a[mf], b[nf], acc[mf][nf]);
    }
  }
};

template <int BM, int BN, int BK, int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS * 32)
    awq_gemm_kernel(const __half* x, const uint32_t* qweight, const uint32_t* qzeros, const __half* scales, __half* y,
                    float* ws, int M, int N, int K, int G) {
  qt::grid_dependency_entry();
  using T = AwqGemmTile<BM, BN, BK, WARPS, STAGES>;
  QT_DYNAMIC_SHARED(smem, unsigned char);
  __half* Bs = reinterpret_cast<__half*>(smem + STAGES * T::STAGE_BYTES);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const KTileRange range = split_k_range(K / BK);
  float acc[T::MF][T::NF][4];
  zero_accumulators(acc);
  cp_async_pipeline<STAGES>(
      range.count,
      [&](int slot, int t) {
        T::load(smem + slot * T::STAGE_BYTES, x, qweight, qzeros, scales, range.begin + t, m0, n0, M, N, K, G, tid);
      },
      [&](int slot, int) {
        // Bs was last read by the previous tile's mma, which the pipeline's barrier has retired.
        const unsigned char* stage = smem + slot * T::STAGE_BYTES;
        T::dequant(stage, Bs, tid);
        __syncthreads();  // Bs written by every thread before any warp's ldmatrix reads it
        T::mma(stage, Bs, acc, warp, lane);
      });

  store_mma_tile<T::MF, T::NF, T::WN>(acc, y, ws, m0, n0, warp, lane, M, N);
}
