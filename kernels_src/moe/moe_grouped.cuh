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
// STAGES 2 requests the next tile's weight codes before this tile's multiply (register prefetch); 1 does not.
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

// A weight tile (BN columns x BK of K) of expert e is loaded as "units", one global load of codes each:
//   Q8_0: 8 consecutive k of row n (8 bytes, one scale); INT8: 4 columns of one k (4 bytes); AWQ: one packed
//   word, 8 columns of one k; TensorRT-LLM: 16 stored bytes, 16 k of one column.
// Loading (codes into registers) and storing (dequantized fp16 into Bs[n - n0][k - k0], stride STRIDE) are
// separate steps so the next tile's loads can be in flight while this tile multiplies (STAGES = 2).
// Thread tid takes units tid + i * THREADS. A block's threads cover whole runs of units along the stored row
// (THREADS is a multiple of a run), so a thread's units share one coordinate and step along the other: the
// same k (Q8_0, TensorRT-LLM) or the same columns (INT8, AWQ), and unit i's place is a thread constant plus
// i rows of the tile. The main loop's only divisions are by G: one a unit for a Q8_0 scale, k / G otherwise.
template <int FMT, int BN, int BK, int THREADS>
struct MoeUnits {
  static constexpr int PER_ROW_K = FMT == kMoeQ8_0 ? BK / 8 : BK / 16;  // row-major formats: units along k
  static constexpr int PER_K = FMT == kMoeAwq ? BN / 8 : BN / 4;          // [K][N] formats: units along n
  static constexpr bool ALONG_K = FMT == kMoeQ8_0 || FMT >= kMoeTrtInt8Sym;
  static constexpr int RUN = ALONG_K ? PER_ROW_K : PER_K;  // units in one stored row of the tile
  static constexpr int COUNT = ALONG_K ? BN * PER_ROW_K : BK * PER_K;
  static constexpr int PER_THREAD = (COUNT + THREADS - 1) / THREADS;
  static constexpr int STEP = THREADS / RUN;  // rows of the tile between one unit of a thread and its next
  static constexpr int WORDS = FMT == kMoeQ8_0 ? 2 : FMT >= kMoeTrtInt8Sym ? 4 : 1;  // 32-bit codes per unit
  static constexpr int RAW = PER_THREAD * WORDS;
  static_assert(THREADS % RUN == 0, "a thread's units must share their coordinate along the stored row");
  // Unit i of thread tid: its first column (relative to n0) and first k (relative to k0).
  static __device__ __forceinline__ int dn(int tid, int i) {
    return ALONG_K ? tid / RUN + i * STEP : (tid % RUN) * (FMT == kMoeAwq ? 8 : 4);
  }
  static __device__ __forceinline__ int dk(int tid, int i) {
    return ALONG_K ? (tid % RUN) * (FMT == kMoeQ8_0 ? 8 : 16) : tid / RUN + i * STEP;
  }
  static __device__ __forceinline__ bool used(int tid, int i) { return COUNT % THREADS == 0 || tid + i * THREADS < COUNT; }
};

// Where unit i of this thread sits in each matrix's arrays: its codes (bytes; AWQ: 32-bit words) and its
// group's scales (and zeros). The matrices of a fused pair share their layout, so one offset serves both: a
// block keeps one set of offsets live across its K loop, not one per matrix.
template <int FMT, int BN, int BK, int THREADS>
struct MoeUnitAt {
  bool valid;
  int64_t code;   // codes of the unit
  int64_t scale;  // its scale (Q8_0, TensorRT-LLM) or first of its columns' scales (INT8, AWQ), in elements
  int64_t zero;   // AWQ: its packed zero word; INT8 asym: as `scale`
  __device__ __forceinline__ MoeUnitAt(int i, int e, int n0, int k0, int N, int K, int G, int tid) {
    using U = MoeUnits<FMT, BN, BK, THREADS>;
    const int n = n0 + U::dn(tid, i), k = k0 + U::dk(tid, i);
    const int groups = K / G;                           // K % G == 0 (the family's shape check)
    const int kg = (int)((unsigned)k / (unsigned)G);    // one 32-bit division; shared where a thread's units share k
    valid = U::used(tid, i) && n < N && k < K;
    if constexpr (FMT == kMoeQ8_0) {
      code = ((int64_t)e * N + n) * K + k;
      // (row * K + k) / G: K % G == 0, so the row's scales start at row * K / G. Written as one division of the
      // code offset, not as a row product the compiler would keep in two registers per unit across the K loop:
      // at bm = 64 that held 189 registers a thread, two blocks an SM, against 144 and three this way (ptxas).
      scale = zero = code / G;
    } else if constexpr (FMT == kMoeInt8Sym || FMT == kMoeInt8Asym) {
      code = ((int64_t)e * K + k) * N + n;
      scale = zero = ((int64_t)e * groups + kg) * N + n;
    } else if constexpr (FMT == kMoeAwq) {
      code = ((int64_t)e * K + k) * (N / 8) + n / 8;
      scale = ((int64_t)e * groups + kg) * N + n;
      zero = ((int64_t)e * groups + kg) * (N / 8) + n / 8;
    } else {
      code = (int64_t)e * N * K + (int64_t)(n / 2) * 2 * K + (k / 64) * 128 + (n % 2) * 64 + k % 64;
      scale = zero = ((int64_t)e * groups + kg) * N + n;  // G % 16 == 0: the unit's 16 k are one group
    }
  }
};

template <int FMT, int BN, int BK, int THREADS, int MATS>
__device__ __forceinline__ void moe_load_tile(uint32_t (&raw)[MATS][MoeUnits<FMT, BN, BK, THREADS>::RAW],
                                              const MoeMatrix (&m)[MATS], int e, int n0, int k0, int N, int K, int G,
                                              int tid) {
  using U = MoeUnits<FMT, BN, BK, THREADS>;
#pragma unroll
  for (int i = 0; i < U::PER_THREAD; ++i) {
    const MoeUnitAt<FMT, BN, BK, THREADS> at(i, e, n0, k0, N, K, G, tid);
#pragma unroll
    for (int mat = 0; mat < MATS; ++mat) {
      uint32_t* r = raw[mat] + i * U::WORDS;
#pragma unroll
      for (int j = 0; j < U::WORDS; ++j) r[j] = 0u;
      if (!at.valid) continue;
      const unsigned char* q = static_cast<const unsigned char*>(m[mat].q);
      if constexpr (FMT == kMoeQ8_0) {
        const uint2 v = *reinterpret_cast<const uint2*>(q + at.code);
        r[0] = v.x, r[1] = v.y;
      } else if constexpr (FMT == kMoeInt8Sym || FMT == kMoeInt8Asym) {
        r[0] = *reinterpret_cast<const uint32_t*>(q + at.code);
      } else if constexpr (FMT == kMoeAwq) {
        r[0] = reinterpret_cast<const uint32_t*>(q)[at.code];
      } else {
        const uint4 v = *reinterpret_cast<const uint4*>(q + at.code);
        r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
      }
    }
  }
}

// Dequantizes the codes in `raw` into each matrix's fp16 tile, Bs + mat * MAT_HALVES ([BN][STRIDE]).
template <int FMT, int BN, int BK, int THREADS, int STRIDE, int MATS, int MAT_HALVES>
__device__ __forceinline__ void moe_store_tile(__half* Bs, const uint32_t (&raw)[MATS][MoeUnits<FMT, BN, BK, THREADS>::RAW],
                                               const MoeMatrix (&m)[MATS], int e, int n0, int k0, int N, int K, int G,
                                               int tid) {
  using U = MoeUnits<FMT, BN, BK, THREADS>;
#pragma unroll
  for (int i = 0; i < U::PER_THREAD; ++i) {
    if (!U::used(tid, i)) continue;
    const int dn = U::dn(tid, i), dk = U::dk(tid, i);
    const MoeUnitAt<FMT, BN, BK, THREADS> at(i, e, n0, k0, N, K, G, tid);
#pragma unroll
    for (int mat = 0; mat < MATS; ++mat) {
      const uint32_t* r = raw[mat] + i * U::WORDS;
      __half* B = Bs + mat * MAT_HALVES;
      const MoeMatrix w = m[mat];
      if constexpr (FMT == kMoeQ8_0) {
        const float s = at.valid ? static_cast<const float*>(w.scales)[at.scale] : 0.0f;
        uint32_t h[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t word = r[j / 2];
          const int sh = (j & 1) * 16;
          h[j] = qt::cvt_f16x2((float)(signed char)(word >> sh) * s, (float)(signed char)(word >> (sh + 8)) * s);
        }
        *reinterpret_cast<uint4*>(B + dn * STRIDE + dk) = make_uint4(h[0], h[1], h[2], h[3]);
      } else if constexpr (FMT == kMoeInt8Sym || FMT == kMoeInt8Asym) {
        // The four columns' scales (and zeros) as packed fp16, widened one at a time where they are used.
        uint2 s = make_uint2(0u, 0u), z = make_uint2(0u, 0u);
        if (at.valid) {
          s = *reinterpret_cast<const uint2*>(static_cast<const __half*>(w.scales) + at.scale);
          if (FMT == kMoeInt8Asym) z = *reinterpret_cast<const uint2*>(static_cast<const __half*>(w.zeros) + at.zero);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t sw = j < 2 ? s.x : s.y, zw = j < 2 ? z.x : z.y;
          const float sj = __half2float(__ushort_as_half((unsigned short)(sw >> (16 * (j & 1)))));
          const float zj = __half2float(__ushort_as_half((unsigned short)(zw >> (16 * (j & 1)))));
          B[(dn + j) * STRIDE + dk] = __float2half_rn((float)((int)((r[0] >> (8 * j)) & 255u) - 128) * sj + zj);
        }
      } else if constexpr (FMT == kMoeAwq) {
        // (q - z) is exact in fp16 and the product rounds once, as the float product (exact) rounded to fp16 does.
        uint32_t q[4], zero[4], s[4] = {0u, 0u, 0u, 0u};
        qt::dequant_u4x8_to_f16x2(r[0], q);
        qt::dequant_u4x8_to_f16x2(at.valid ? static_cast<const uint32_t*>(w.zeros)[at.zero] : 0u, zero);
        if (at.valid) {
          const uint4 sv = *reinterpret_cast<const uint4*>(static_cast<const __half*>(w.scales) + at.scale);
          s[0] = sv.x, s[1] = sv.y, s[2] = sv.z, s[3] = sv.w;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t v = qt::mul_f16x2(qt::sub_f16x2(q[j], zero[j]), s[j]);
          B[(dn + 2 * j) * STRIDE + dk] = __ushort_as_half((unsigned short)(v & 0xffffu));
          B[(dn + 2 * j + 1) * STRIDE + dk] = __ushort_as_half((unsigned short)(v >> 16));
        }
      } else {
        // Rows were permuted within 16 and bytes 1, 2 of each word swapped; undo both.
        constexpr int kRowPerm[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
        const float s = at.valid ? __half2float(static_cast<const __half*>(w.scales)[at.scale]) : 0.0f;
        const float z = at.valid && FMT == kMoeTrtInt8Asym ? __half2float(static_cast<const __half*>(w.zeros)[at.zero]) : 0.0f;
        float v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const uint32_t word = r[j / 4];
          const int pos = (j & ~3) | ((j & 1) << 1) | ((j & 2) >> 1);
          v[kRowPerm[pos]] = at.valid ? (float)((int)((word >> (8 * (j & 3))) & 255u) - 128) * s + z : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 16; j += 2) *reinterpret_cast<uint32_t*>(B + dn * STRIDE + dk + j) = qt::cvt_f16x2(v[j], v[j + 1]);
      }
    }
  }
}

// One output value (or, FUSED, its gate/up pair g, u) at routed row i (-1: padding), column n: fp16 to y, or with
// a split K this split's fp32 partials in ws[z][mat][count][N].
template <int FUSED>
__device__ __forceinline__ void moe_store_output(__half* y, float* ws, int i, int n, int N, int count, float g, float u) {
  if (i < 0 || n >= N) return;
  if (gridDim.z > 1) {
    const int64_t plane = (int64_t)count * N, at = (int64_t)i * N + n;
    ws[(int64_t)blockIdx.z * (FUSED ? 2 : 1) * plane + at] = g;
    if (FUSED) ws[((int64_t)blockIdx.z * 2 + 1) * plane + at] = u;
  } else {
    y[(int64_t)i * N + n] = FUSED ? gate_up_swiglu(g, u) : __float2half_rn(g);
  }
}

template <int FMT, int FUSED, int BM, int BN, int BK, int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS * 32, 1)
    moe_grouped_kernel(const __half* __restrict__ a, const int* __restrict__ sorted, const int* __restrict__ block_expert,
                       const int* __restrict__ total, const void* w_q, const void* w_scales, const void* w_zeros,
                       const void* u_q, const void* u_scales, const void* u_zeros, __half* __restrict__ y,
                       float* __restrict__ ws, int count, int a_div, int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int THREADS = WARPS * 32, STRIDE = BK + 8, MATS = FUSED ? 2 : 1;
  constexpr int A_HALVES = BM * STRIDE, B_HALVES = BN * STRIDE, STAGE = A_HALVES + MATS * B_HALVES;
  constexpr int WN = BN / WARPS;
  static_assert(BK % 64 == 0 && BN % WARPS == 0 && WN % 8 == 0, "tile shape");
  QT_DYNAMIC_SHARED(smem, __half);
  QT_SHARED(rows, int[BM]);  // routed row of each slot, -1 for padding
  QT_SHARED(a_rows, int[BM]);  // the row of `a` that slot reads (rows[r] / a_div), -1 for padding
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int slot0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (slot0 >= total[0]) return;
  const int e = block_expert[blockIdx.y];
  for (int r = tid; r < BM; r += THREADS) {
    const int i = sorted[slot0 + r];
    rows[r] = i < count ? i : -1;
    a_rows[r] = i < count ? i / a_div : -1;
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

  using Units = MoeUnits<FMT, BN, BK, THREADS>;
  MoeMatrix mats[MATS];
  mats[0] = MoeMatrix{w_q, w_scales, w_zeros};
  if (FUSED) mats[MATS - 1] = MoeMatrix{u_q, u_scales, u_zeros};
  uint32_t raw[MATS][Units::RAW];
  if (STAGES == 2 && ntiles > 0) moe_load_tile<FMT, BN, BK, THREADS>(raw, mats, e, n0, kt_begin * BK, N, K, G, tid);
  for (int t = 0; t < ntiles; ++t) {
    __half* As = smem + (t & 1) * STAGE;
    const int k0 = (kt_begin + t) * BK;
    // A tile: BM rows of CH 16-byte chunks; THREADS is a multiple of CH, so a thread's chunks share one k.
    constexpr int CH = BK / 8, A_CHUNKS = BM * CH, A_PER_THREAD = (A_CHUNKS + THREADS - 1) / THREADS;
    static_assert(THREADS % CH == 0, "a thread's A chunks must share their k");
    const int ka = k0 + (tid % CH) * 8;
#pragma unroll
    for (int j = 0; j < A_PER_THREAD; ++j) {
      const int r = tid / CH + j * (THREADS / CH);
      if (A_CHUNKS % THREADS != 0 && r >= BM) break;
      const int src_row = a_rows[r];
      const bool valid = src_row >= 0 && ka < K;
      const __half* src = a + (valid ? (int64_t)src_row * K + ka : 0);
      qt::cp_async_cg16(qt::smem_u32(As + r * STRIDE + (tid % CH) * 8), src, valid ? 16u : 0u);
    }
    qt::cp_async_commit();
    if (STAGES == 1) moe_load_tile<FMT, BN, BK, THREADS>(raw, mats, e, n0, k0, N, K, G, tid);
    moe_store_tile<FMT, BN, BK, THREADS, STRIDE, MATS, B_HALVES>(As + A_HALVES, raw, mats, e, n0, k0, N, K, G, tid);
    // STAGES 2: the next tile's codes are requested now and arrive while this tile multiplies.
    if (STAGES == 2 && t + 1 < ntiles) moe_load_tile<FMT, BN, BK, THREADS>(raw, mats, e, n0, k0 + BK, N, K, G, tid);
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

  if constexpr (kMma) {
    const int gid = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int r = mf * 16 + gid + 8 * (c >> 1), n = n0 + warp * WN + nf * 8 + 2 * t4 + (c & 1);
          moe_store_output<FUSED>(y, ws, rows[r], n, N, count, acc[0][mf][nf][c], acc[MATS - 1][mf][nf][c]);
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
        if (lane == c % 32)
          moe_store_output<FUSED>(y, ws, rows[r], n0 + warp * WN + c, N, count, acc[0][r][c][0], acc[MATS - 1][r][c][0]);
  }
}
