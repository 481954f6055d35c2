#pragma once
// The grouped expert GEMM of a MoE layer: every expert's rows in one launch. The routed rows i = t*top_k + j
// arrive grouped by expert and padded to blocks of BM slots (moe_place_kernel's alignment: sorted[slot] = i,
// or `count` in padding; block_expert[b]); block (x, y, z) computes columns [x*BN, x*BN + BN) of the BM slots
// of block y against that block's expert, over the z-th share of K:
//   y[i][n] = sum_k a[i / a_div][k] * W_e[n][k]     (a_div = top_k when a holds tokens, 1 when routed rows)
// and, FUSED, h[i][n] = silu(gate) * up from the two matrices of the expert (SwiGLU in the epilogue).
// Output rows are routed rows, so a later GEMM or the finalize step reads them by i whatever its own blocks.
//
// Each K tile: A rows gathered by cp.async into shared memory, the expert's weight tile dequantized from its
// stored format into an fp16 [BN][BK] tile (FMT below), both double-buffered with one barrier per tile.
// BM >= 16 multiplies on tensor cores (mma.m16n8k16 through F16GemmTile's fragment loads); BM < 16 (decode,
// a grouped GEMV) on the FMA pipes: lane l of warp w sums k pairs 2l + 64j for the warp's BN/WARPS columns,
// reducing across the warp once at the end. Split-k (gridDim.z > 1): fp32 partials in ws, reduced by
// splitk_reduce_kernel or, FUSED, gate_up_reduce_kernel (which applies SwiGLU).
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/splitk.cuh"
#include "kernels_src/f16_gemm/f16_gemm.cuh"
#include "kernels_src/gate_up/gate_up_common.cuh"
#include "kernels_src/moe/moe_routing.cuh"  // moe_place_kernel: the block alignment each plan starts with

// Weight formats, all [E] x one expert's arrays, experts back to back in each array:
//   0 Q8_0        q int8 [N][K], scales f32 [N*K/G] (one per G consecutive weights of a row);
//   1 INT8 sym    q uint8 [K][N] (+128), scales f16 [K/G][N];          w = (q - 128) s
//   2 INT8 asym   as 1 plus zeros f16 [K/G][N];                         w = (q - 128) s + z
//   3 AWQ INT4    qweight int32 [K][N/8] (AWQ nibble order), qzeros int32 [K/G][N/8], scales f16 [K/G][N];
//                 w = (q - z) s
//   4, 5          formats 1 and 2 with q in TensorRT-LLM's preprocessed layout (moe_reference.h).
enum { kMoeQ8_0 = 0, kMoeInt8Sym = 1, kMoeInt8Asym = 2, kMoeAwq = 3, kMoeTrtInt8Sym = 4, kMoeTrtInt8Asym = 5 };

struct MoeMatrix {
  const void* q;
  const void* scales;
  const void* zeros;
};

// Weight (n, k..) tile of expert e as fp16 rows Bs[n - n0][k - k0] (stride STRIDE); zero past N and K.
template <int FMT, int BN, int BK, int THREADS, int STRIDE>
__device__ __forceinline__ void moe_dequant_tile(__half* Bs, MoeMatrix w, int e, int n0, int k0, int N, int K, int G,
                                                 int tid) {
  if constexpr (FMT == kMoeQ8_0) {
    constexpr int U = BK / 8;  // 8 consecutive weights of a row share one scale (G % 8 == 0)
    for (int u = tid; u < BN * U; u += THREADS) {
      const int r = u / U, c = (u % U) * 8, n = n0 + r, k = k0 + c;
      uint32_t h[4] = {0u, 0u, 0u, 0u};
      if (n < N && k < K) {
        const int64_t flat = ((int64_t)e * N + n) * K + k;
        const uint2 q = *reinterpret_cast<const uint2*>(static_cast<const signed char*>(w.q) + flat);
        const float s = static_cast<const float*>(w.scales)[flat / G];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t word = j < 2 ? q.x : q.y;
          const int sh = (j & 1) * 16;
          h[j] = qt::cvt_f16x2((float)(signed char)(word >> sh) * s, (float)(signed char)(word >> (sh + 8)) * s);
        }
      }
      *reinterpret_cast<uint4*>(Bs + r * STRIDE + c) = make_uint4(h[0], h[1], h[2], h[3]);
    }
  } else if constexpr (FMT == kMoeInt8Sym || FMT == kMoeInt8Asym) {
    constexpr int U = BN / 4;  // 4 columns of one k per 32-bit load (N % 4 == 0)
    for (int u = tid; u < BK * U; u += THREADS) {
      const int kk = u / U, c = (u % U) * 4, n = n0 + c, k = k0 + kk;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (n < N && k < K) {
        const uint32_t q = *reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(w.q) +
                                                              ((int64_t)e * K + k) * N + n);
        const int64_t g = ((int64_t)e * (K / G) + k / G) * N + n;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          v[j] = (float)((int)((q >> (8 * j)) & 255u) - 128) * __half2float(static_cast<const __half*>(w.scales)[g + j]);
          if (FMT == kMoeInt8Asym) v[j] += __half2float(static_cast<const __half*>(w.zeros)[g + j]);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) Bs[(c + j) * STRIDE + kk] = __float2half_rn(v[j]);
    }
  } else if constexpr (FMT == kMoeAwq) {
    constexpr int U = BN / 8;  // one packed word: 8 columns of one k (N % 8 == 0)
    for (int u = tid; u < BK * U; u += THREADS) {
      const int kk = u / U, c = (u % U) * 8, n = n0 + c, k = k0 + kk;
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0.0f;
      if (n < N && k < K) {
        const uint32_t q = static_cast<const uint32_t*>(w.q)[((int64_t)e * K + k) * (N / 8) + n / 8];
        const uint32_t z = static_cast<const uint32_t*>(w.zeros)[((int64_t)e * (K / G) + k / G) * (N / 8) + n / 8];
        const __half* s = static_cast<const __half*>(w.scales) + ((int64_t)e * (K / G) + k / G) * N + n;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int sh = 4 * (j / 2 + 4 * (j % 2));  // column j sits in nibble 0,4,1,5,2,6,3,7
          v[j] = (float)((int)((q >> sh) & 15u) - (int)((z >> sh) & 15u)) * __half2float(s[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) Bs[(c + j) * STRIDE + kk] = __float2half_rn(v[j]);
    }
  } else {
    // 16 stored bytes: 16 k of one column, rows permuted within 16 and bytes 1, 2 of each word swapped.
    constexpr int U = BK / 16;
    constexpr int kRowPerm[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
    for (int u = tid; u < BN * U; u += THREADS) {
      const int r = u / U, c = (u % U) * 16, n = n0 + r, kb = k0 + c;
      float v[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = 0.0f;
      if (n < N && kb < K) {
        const unsigned char* col = static_cast<const unsigned char*>(w.q) + (int64_t)e * N * K +
                                   (int64_t)(n / 2) * 2 * K + (kb / 64) * 128 + (n % 2) * 64 + kb % 64;
        const uint4 raw = *reinterpret_cast<const uint4*>(col);
        const int64_t g = ((int64_t)e * (K / G) + kb / G) * N + n;  // G % 16 == 0: one group
        const float s = __half2float(static_cast<const __half*>(w.scales)[g]);
        const float z = FMT == kMoeTrtInt8Asym ? __half2float(static_cast<const __half*>(w.zeros)[g]) : 0.0f;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const uint32_t word = j < 4 ? raw.x : j < 8 ? raw.y : j < 12 ? raw.z : raw.w;
          const int pos = (j & ~3) | ((j & 1) << 1) | ((j & 2) >> 1);  // undo the byte swap
          v[kRowPerm[pos]] = (float)((int)((word >> (8 * (j & 3))) & 255u) - 128) * s + z;
        }
      }
#pragma unroll
      for (int j = 0; j < 16; j += 2)
        *reinterpret_cast<uint32_t*>(Bs + r * STRIDE + c + j) = qt::cvt_f16x2(v[j], v[j + 1]);
    }
  }
}

template <int FMT, int FUSED, int BM, int BN, int BK, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    moe_grouped_kernel(const __half* __restrict__ a, const int* __restrict__ sorted, const int* __restrict__ block_expert,
                       const int* __restrict__ total, const void* w_q, const void* w_scales, const void* w_zeros,
                       const void* u_q, const void* u_scales, const void* u_zeros, __half* __restrict__ y,
                       float* __restrict__ ws, int count, int a_div, int N, int K, int G) {
  constexpr int THREADS = WARPS * 32, STRIDE = BK + 8, MATS = FUSED ? 2 : 1;
  constexpr int A_HALVES = BM * STRIDE, B_HALVES = BN * STRIDE, STAGE = A_HALVES + MATS * B_HALVES;
  constexpr int WN = BN / WARPS;
  static_assert(BK % 64 == 0 && BN % WARPS == 0 && WN % 8 == 0, "tile shape");
  QT_DYNAMIC_SHARED(smem, __half);
  QT_SHARED(rows, int[BM]);  // routed row of each slot, -1 for padding
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int slot0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (slot0 >= total[0]) return;
  const int e = block_expert[blockIdx.y];
  for (int r = tid; r < BM; r += THREADS) {
    const int i = sorted[slot0 + r];
    rows[r] = i < count ? i : -1;
  }
  __syncthreads();

  const int ktiles = (K + BK - 1) / BK;
  const int per_split = (ktiles + (int)gridDim.z - 1) / (int)gridDim.z;
  const int kt_begin = min(ktiles, (int)blockIdx.z * per_split);
  const int ntiles = min(ktiles, kt_begin + per_split) - kt_begin;

  constexpr bool kMma = BM >= 16;
  constexpr int MF = kMma ? BM / 16 : 1, NF = WN / 8;
  float acc[MATS][kMma ? MF : BM][kMma ? NF : WN][kMma ? 4 : 1];
#pragma unroll
  for (int m = 0; m < MATS; ++m)
#pragma unroll
    for (int i = 0; i < (kMma ? MF : BM); ++i)
#pragma unroll
      for (int j = 0; j < (kMma ? NF : WN); ++j)
#pragma unroll
        for (int c = 0; c < (kMma ? 4 : 1); ++c) acc[m][i][j][c] = 0.0f;

  for (int t = 0; t < ntiles; ++t) {
    __half* As = smem + (t & 1) * STAGE;
    const int k0 = (kt_begin + t) * BK;
    constexpr int CH = BK / 8;
    for (int c = tid; c < BM * CH; c += THREADS) {
      const int r = c / CH, k = k0 + (c % CH) * 8, i = rows[r];
      const bool valid = i >= 0 && k < K;
      const __half* src = a + (valid ? (int64_t)(i / a_div) * K + k : 0);
      qt::cp_async_cg16(qt::smem_u32(As + r * STRIDE + (c % CH) * 8), src, valid ? 16u : 0u);
    }
    qt::cp_async_commit();
    moe_dequant_tile<FMT, BN, BK, THREADS, STRIDE>(As + A_HALVES, MoeMatrix{w_q, w_scales, w_zeros}, e, n0, k0, N, K, G,
                                                   tid);
    if (FUSED)
      moe_dequant_tile<FMT, BN, BK, THREADS, STRIDE>(As + A_HALVES + B_HALVES, MoeMatrix{u_q, u_scales, u_zeros}, e, n0,
                                                     k0, N, K, G, tid);
    qt::cp_async_wait<0>();
    __syncthreads();
    if constexpr (kMma) {
      using T = F16GemmTile<BM, BN, BK, WARPS, 2>;
#pragma unroll
      for (int m = 0; m < MATS; ++m) T::mma(As, As + A_HALVES + m * B_HALVES, acc[m], warp, lane);
    } else {
#pragma unroll
      for (int j = 0; j < BK / 64; ++j) {
        const int kk = 64 * j + 2 * lane;
        float2 av[BM];
#pragma unroll
        for (int r = 0; r < BM; ++r) av[r] = __half22float2(*reinterpret_cast<const __half2*>(As + r * STRIDE + kk));
#pragma unroll
        for (int m = 0; m < MATS; ++m)
#pragma unroll
          for (int c = 0; c < WN; ++c) {
            const float2 b = __half22float2(
                *reinterpret_cast<const __half2*>(As + A_HALVES + m * B_HALVES + (warp * WN + c) * STRIDE + kk));
#pragma unroll
            for (int r = 0; r < BM; ++r) acc[m][r][c][0] += av[r].x * b.x + av[r].y * b.y;
          }
      }
    }
  }

  // One output value (or, FUSED, its gate/up pair) at routed row i, column n.
  const int64_t plane = (int64_t)count * N;
  auto store = [&](int i, int n, float g, float u) {
    if (i < 0 || n >= N) return;
    if (gridDim.z > 1) {
      ws[(int64_t)blockIdx.z * MATS * plane + (int64_t)i * N + n] = g;
      if (FUSED) ws[((int64_t)blockIdx.z * MATS + 1) * plane + (int64_t)i * N + n] = u;
    } else {
      y[(int64_t)i * N + n] = FUSED ? gate_up_swiglu(g, u) : __float2half_rn(g);
    }
  };
  if constexpr (kMma) {
    const int gid = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int r = mf * 16 + gid + 8 * (c >> 1), n = n0 + warp * WN + nf * 8 + 2 * t4 + (c & 1);
          store(rows[r], n, acc[0][mf][nf][c], acc[MATS - 1][mf][nf][c]);
        }
  } else {
#pragma unroll
    for (int m = 0; m < MATS; ++m)
#pragma unroll
      for (int r = 0; r < BM; ++r)
#pragma unroll
        for (int c = 0; c < WN; ++c)
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) acc[m][r][c][0] += __shfl_xor_sync(0xffffffffu, acc[m][r][c][0], o);
#pragma unroll
    for (int r = 0; r < BM; ++r)
#pragma unroll
      for (int c = 0; c < WN; ++c)
        if (lane == c % 32) store(rows[r], n0 + warp * WN + c, acc[0][r][c][0], acc[MATS - 1][r][c][0]);
  }
}
