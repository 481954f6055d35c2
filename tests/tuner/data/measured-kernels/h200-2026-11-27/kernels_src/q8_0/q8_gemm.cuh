#pragma once
// Prefill GEMM for Q8_0 on tensor cores: y[M][N] = x[M][K] * W^T, W int8 [N][K] row-major with one fp32 scale
// per G consecutive elements of a row; any M and N, G % BK == 0 (a K tile lies inside one group).
//
// W's [N][K] layout is already the "col" B operand of mma.row.col, so both operands are k-contiguous rows in
// shared memory and load with non-transposed ldmatrix. A k step of a fragment is 32 bytes either way:
//   ACT = 0  A = x as fp16. After a stage lands, the block dequantizes its int8 B tile to one fp16 tile Bs
//            [BN][BK+8], w = fp16(q * s) with the fp32 group scale (byte permutes + magic floats, exact up to
//            that one rounding), then mma.m16n8k16 with fp32 accumulators.
//   ACT = 1  A = x quantized per group of G by q8_quantize_act_kernel (int8 xq + fp32 scale xs, a launch
//            before this one). mma.m16n8k32 s8 -> s32 over the tile's BK/32 steps is exact; the tile's s32
//            sums are then scaled by xs[row] * s[col] into the fp32 accumulators (one group per tile).
//
// Block tile BM x BN, WARPS warps side by side along N. Shared memory (dynamic), per pipeline stage: the A
// tile, the int8 B tile, the tile's weight scales [BN] and (ACT = 1) activation scales [BM], all by cp.async;
// rows past M or N are zero-filled (src-size 0 from a clamped, valid address). Row strides are padded so the
// eight 16-byte rows an ldmatrix reads fall in distinct banks (stride / 16 odd).
// Pipeline (STAGES >= 2): kernels_src/common/gemm_pipeline.cuh, with this kernel's stage loader; its barrier
// publishes tile t and retires the stage being refilled (and Bs); a second one here (ACT = 0) publishes Bs. Split-k: blockIdx.z takes a contiguous range of K tiles and writes fp32
// partials to ws[z][M][N] for splitk_reduce_kernel (kernels_src/common/splitk.cuh).
#include "kernels_src/common/gemm_pipeline.cuh"
#include "kernels_src/q8_0/q8_common.cuh"

// Activations -> int8 per group of G: xs[g] = amax / 127, xq = round_even(x * 127 / amax) (0 for an all-zero
// group). One warp per group; x and xq are [M][K] flattened, so group g is elements g*G .. g*G+G-1.
template <int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    q8_quantize_act_kernel(const __half* x, int8_t* xq, float* xs, int groups, int G) {
  qt::grid_dependency_entry();
  const int lane = threadIdx.x & 31;
  const int g = blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (g >= groups) return;  // uniform over the warp
  const __half* src = x + (int64_t)g * G;
  float amax = 0.0f;
  for (int i = 2 * lane; i < G; i += 64) {
    const uint32_t h2 = *reinterpret_cast<const uint32_t*>(src + i);
    amax = fmaxf(amax, fmaxf(fabsf(q8::lo_f32(h2)), fabsf(q8::hi_f32(h2))));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 2 * lane; i < G; i += 64) {
    const uint32_t h2 = *reinterpret_cast<const uint32_t*>(src + i);
    const int a = q8::round_even(q8::lo_f32(h2) * inv), b = q8::round_even(q8::hi_f32(h2) * inv);
    *reinterpret_cast<uint16_t*>(xq + (int64_t)g * G + i) = (uint16_t)((a & 0xff) | ((b & 0xff) << 8));
  }
  if (lane == 0) xs[g] = amax / 127.0f;
}

template <int BM, int BN, int BK, int WARPS, int STAGES, int ACT>
struct Q8GemmTile {
  static constexpr int THREADS = WARPS * 32;
  static constexpr int PAD8 = (BK / 16) % 2 == 0 ? 16 : 32;   // int8 rows: BK + PAD8 bytes, an odd count of 16
  static constexpr int A_STRIDE = ACT ? BK + PAD8 : 2 * BK + 16;  // bytes
  static constexpr int B_STRIDE = BK + PAD8;                       // bytes
  static constexpr int BS_STRIDE = 2 * BK + 16;                    // bytes, dequantized fp16 B (ACT = 0)
  static constexpr int A_BYTES = BM * A_STRIDE;
  static constexpr int B_BYTES = BN * B_STRIDE;
  static constexpr int SW_BYTES = BN * 4;
  static constexpr int SX_BYTES = ACT ? BM * 4 : 0;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + SW_BYTES + SX_BYTES;
  static constexpr int BS_BYTES = ACT ? 0 : BN * BS_STRIDE;
  static constexpr int WN = BN / WARPS;  // columns per warp
  static constexpr int NF = WN / 8;      // n fragments per warp
  static constexpr int MF = BM / 16;     // m fragments per warp
  static constexpr int STEPS = BK / (ACT ? 32 : 16);  // mma k steps per tile, 32 bytes of A row each
  static_assert(BM % 16 == 0 && BK % 32 == 0 && BN % 64 == 0, "tile shape");
  static_assert(WN % 8 == 0 && NF >= 1, "each warp needs whole 8-column fragments");
  static_assert(STAGES >= 2, "the pipeline needs two stages");
  static_assert(A_BYTES % 16 == 0 && B_BYTES % 16 == 0 && STAGE_BYTES % 16 == 0, "16-byte aligned sections");

  // Issues the cp.async copies of K tile `kt` into stage buffer `base`. `a` is x (fp16) or xq (int8).
  static __device__ __forceinline__ void load(unsigned char* base, const void* a, const int8_t* q,
                                              const float* scales, const float* xs, int kt, int m0, int n0, int M,
                                              int N, int K, int G, int tid) {
    const int k0 = kt * BK;
    const int a_row_bytes = ACT ? K : 2 * K;
    constexpr int A_CHUNKS_PER_ROW = (ACT ? BK : 2 * BK) / 16;
    for (int c = tid; c < BM * A_CHUNKS_PER_ROW; c += THREADS) {
      const int r = c / A_CHUNKS_PER_ROW, cc = c % A_CHUNKS_PER_ROW;
      const int row = m0 + r;
      const unsigned char* src = reinterpret_cast<const unsigned char*>(a) + (int64_t)min(row, M - 1) * a_row_bytes +
                                 (ACT ? k0 : 2 * k0) + cc * 16;
      qt::cp_async_cg16(qt::smem_u32(base + r * A_STRIDE + cc * 16), src, row < M ? 16u : 0u);
    }
    constexpr int B_CHUNKS_PER_ROW = BK / 16;
    for (int c = tid; c < BN * B_CHUNKS_PER_ROW; c += THREADS) {
      const int r = c / B_CHUNKS_PER_ROW, cc = c % B_CHUNKS_PER_ROW;
      const int n = n0 + r;
      const int8_t* src = q + (int64_t)min(n, N - 1) * K + k0 + cc * 16;
      qt::cp_async_cg16(qt::smem_u32(base + A_BYTES + r * B_STRIDE + cc * 16), src, n < N ? 16u : 0u);
    }
    const int groups_per_row = K / G, g = k0 / G;
    for (int c = tid; c < BN + (ACT ? BM : 0); c += THREADS) {
      if (c < BN) {
        const int n = n0 + c;
        qt::cp_async_ca<4>(qt::smem_u32(base + A_BYTES + B_BYTES + c * 4),
                           scales + (int64_t)min(n, N - 1) * groups_per_row + g, n < N ? 4u : 0u);
      } else {
        const int row = m0 + c - BN;
        qt::cp_async_ca<4>(qt::smem_u32(base + A_BYTES + B_BYTES + SW_BYTES + (c - BN) * 4),
                           xs + (int64_t)min(row, M - 1) * groups_per_row + g, row < M ? 4u : 0u);
      }
    }
  }

  // ACT = 0: int8 B of stage `base` -> fp16 Bs, fp16(q * s) per element, 8 elements per thread and pass.
  static __device__ __forceinline__ void dequant(const unsigned char* base, unsigned char* Bs, int tid) {
    const float* sw = reinterpret_cast<const float*>(base + A_BYTES + B_BYTES);
    constexpr int CHUNKS_PER_ROW = BK / 8;
    for (int c = tid; c < BN * CHUNKS_PER_ROW; c += THREADS) {
      const int r = c / CHUNKS_PER_ROW, cc = c % CHUNKS_PER_ROW;
      const uint2 w = *reinterpret_cast<const uint2*>(base + A_BYTES + r * B_STRIDE + cc * 8);
      const float s = sw[r];
      float lo[4], hi[4];
      q8::s8x4_to_f32(w.x, lo);
      q8::s8x4_to_f32(w.y, hi);
      *reinterpret_cast<uint4*>(Bs + r * BS_STRIDE + cc * 16) =
          make_uint4(qt::cvt_f16x2(lo[0] * s, lo[1] * s), qt::cvt_f16x2(lo[2] * s, lo[3] * s),
                     qt::cvt_f16x2(hi[0] * s, hi[1] * s), qt::cvt_f16x2(hi[2] * s, hi[3] * s));
    }
  }

  // The B fragments of k step `kb` (bytes) for this warp's NF fragments, from rows of `stride` bytes.
  static __device__ __forceinline__ void load_b(const unsigned char* B, int stride, int kb, int warp, int lane,
                                                uint32_t (&b)[NF][2]) {
#pragma unroll
    for (int nf = 0; nf + 1 < NF; nf += 2) {
      uint32_t r[4];
      const int n = warp * WN + (nf + (lane >> 4)) * 8 + (lane & 7);
      qt::ldmatrix_x4(r, qt::smem_u32(B + n * stride + kb + ((lane >> 3) & 1) * 16));
      b[nf][0] = r[0], b[nf][1] = r[1], b[nf + 1][0] = r[2], b[nf + 1][1] = r[3];
    }
    if constexpr (NF % 2 == 1) {
      const int n = warp * WN + (NF - 1) * 8 + (lane & 7);
      qt::ldmatrix_x2(b[NF - 1], qt::smem_u32(B + n * stride + kb + ((lane >> 3) & 1) * 16));
    }
  }

  static __device__ __forceinline__ void load_a(const unsigned char* base, int kb, int lane, uint32_t (&a)[MF][4]) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
      qt::ldmatrix_x4(a[mf], qt::smem_u32(base + (mf * 16 + (lane & 15)) * A_STRIDE + kb + (lane >> 4) * 16));
  }

  // ACT = 0: fp16 mma over the tile.
  static __device__ __forceinline__ void mma_f16(const unsigned char* base, const unsigned char* Bs,
                                                 float (&acc)[MF][NF][4], int warp, int lane) {
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      uint32_t a[MF][4], b[NF][2];
      load_a(base, s * 32, lane, a);
      load_b(Bs, BS_STRIDE, s * 32, warp, lane, b);
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) qt::mma_m16n8k16_f16(acc[mf][nf], a[mf], b[nf], acc[mf][nf]);
    }
  }

  // ACT = 1: exact s8 mma over the tile, then one scaling of the tile's sums into the fp32 accumulators.
  static __device__ __forceinline__ void mma_s8(const unsigned char* base, float (&acc)[MF][NF][4], int warp,
                                                int lane) {
    int32_t part[MF][NF][4];
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[mf][nf][i] = 0;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      uint32_t a[MF][4], b[NF][2];
      load_a(base, s * 32, lane, a);
      load_b(base + A_BYTES, B_STRIDE, s * 32, warp, lane, b);
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) qt::mma_m16n8k32_s8(part[mf][nf], a[mf], b[nf], part[mf][nf]);
    }
    const float* sw = reinterpret_cast<const float*>(base + A_BYTES + B_BYTES);
    const float* sx = reinterpret_cast<const float*>(base + A_BYTES + B_BYTES + SW_BYTES);
    const int gid = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mf = 0; mf < MF; ++mf) {
      const float x0 = sx[mf * 16 + gid], x1 = sx[mf * 16 + gid + 8];
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) {
        const float w0 = sw[warp * WN + nf * 8 + 2 * t4], w1 = sw[warp * WN + nf * 8 + 2 * t4 + 1];
        acc[mf][nf][0] += (float)part[mf][nf][0] * (x0 * w0);
        acc[mf][nf][1] += (float)part[mf][nf][1] * (x0 * w1);
        acc[mf][nf][2] += (float)part[mf][nf][2] * (x1 * w0);
        acc[mf][nf][3] += (float)part[mf][nf][3] * (x1 * w1);
      }
    }
  }
};

// `a` is x (fp16 [M][K]) for ACT = 0 and xq (int8 [M][K]) for ACT = 1; xs is read only for ACT = 1.
template <int BM, int BN, int BK, int WARPS, int STAGES, int ACT>
__global__ void __launch_bounds__(WARPS * 32)
    q8_gemm_kernel(const void* a, const int8_t* q, const float* scales, const float* xs, __half* y, float* ws, int M,
                   int N, int K, int G) {
  qt::grid_dependency_entry();
  using T = Q8GemmTile<BM, BN, BK, WARPS, STAGES, ACT>;
  QT_DYNAMIC_SHARED(smem, unsigned char);
  unsigned char* Bs = smem + STAGES * T::STAGE_BYTES;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const KTileRange range = split_k_range(K / BK);
  float acc[T::MF][T::NF][4];
  zero_accumulators(acc);
  cp_async_pipeline<STAGES>(
      range.count,
      [&](int slot, int t) {
        T::load(smem + slot * T::STAGE_BYTES, a, q, scales, xs, range.begin + t, m0, n0, M, N, K, G, tid);
      },
      [&](int slot, int) {
        const unsigned char* stage = smem + slot * T::STAGE_BYTES;
        if constexpr (ACT == 0) {
          T::dequant(stage, Bs, tid);
          __syncthreads();  // Bs written by every thread before any warp's ldmatrix reads it
          T::mma_f16(stage, Bs, acc, warp, lane);
        } else {
          T::mma_s8(stage, acc, warp, lane);
        }
      });

  store_mma_tile<T::MF, T::NF, T::WN>(acc, y, ws, m0, n0, warp, lane, M, N);
}
