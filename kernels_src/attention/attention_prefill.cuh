#pragma once
// Causal flash attention on tensor cores for M query tokens at positions pos0 .. pos0+M-1 (pos0 = pos[0]);
// query i attends to cache rows 0 .. pos0+i (the cache already holds the M new rows).
//
// Grid (ceil(M / BM), H): a block takes BM queries of one head (last query tiles first: they have the most
// keys) and walks the key tiles 0 .. its last query's position in steps of BN. WARPS warps each own BM/WARPS
// query rows (MF fragments of 16). Per key tile:
//   S = Q K^T    ldmatrix.x4 of Q (A) and of K rows (B, non-transposed: K is [key][d], i.e. B column-major),
//                mma.m16n8k16 with fp32 accumulators, over the head dim padded to a multiple of 16;
//   softmax      scale by D^-0.5, causal mask (key > query position: -inf) where the tile crosses the
//                diagonal, running row max m and sum l in fp32 (the 4 lanes of a quad share a row);
//   O += P V     P rounded to fp16 straight from the S accumulators into A fragments, V through
//                ldmatrix.x4.trans (V is [key][d], B must be column-major in key).
// Shared memory (dynamic): Q [BM][SD], K and V [STAGES][BN][SD] with SD = DMAX + 8 halves, an odd number of
// 16-byte chunks per row so the 8 rows of an ldmatrix fall in different banks. Head-dim columns D .. Dp
// (Dp = D rounded up to 16) and key rows past the block's last key are zero-filled by cp.async (src-size 0):
// stale shared memory may be NaN, and 0 * NaN would poison the products. K/V tiles flow through a STAGES-deep
// cp.async pipeline; each iteration commits one group (possibly empty), so wait_group<STAGES-2> means "tile t
// has landed". DMAX (64 or 128) sizes the register accumulators; any D <= DMAX, D % 8 == 0 runs.
#include "kernels_src/common/qt_cuda.h"

namespace attn_prefill {

// -inf (NVRTC has no INFINITY macro and no constexpr spelling of it).
__device__ __forceinline__ float neg_inf() { return __uint_as_float(0xff800000u); }

// cp.async of `rows` rows of one head (`D` halves at `src + row * ld`) into a [rows][SD] tile; rows at or past
// `end` and chunks at or past D are zero-filled.
template <int THREADS, int SD>
__device__ __forceinline__ void load_rows(__half* dst, const __half* src, int rows, int row0, int end, int64_t ld,
                                          int D, int chunks, int tid) {
  for (int c = tid; c < rows * chunks; c += THREADS) {
    const int r = c / chunks, cc = c % chunks;
    const bool ok = row0 + r < end && cc * 8 < D;
    const __half* p = src + (ok ? (int64_t)(row0 + r) * ld + cc * 8 : 0);
    qt::cp_async_cg16(qt::smem_u32(dst + r * SD + cc * 8), p, ok ? 16u : 0u);
  }
}

}  // namespace attn_prefill

template <int BM, int BN, int WARPS, int STAGES, int DMAX>
__global__ void __launch_bounds__(WARPS * 32)
    attention_prefill_kernel(const __half* q, const __half* k_cache, const __half* v_cache, const int* pos,
                             __half* out, int M, int H, int KVH, int D, int C) {
  qt::grid_dependency_entry();
  constexpr int THREADS = WARPS * 32;
  constexpr int SD = DMAX + 8;
  constexpr int RW = BM / WARPS;  // query rows per warp
  constexpr int MF = RW / 16;     // 16-row fragments per warp
  constexpr int NF = BN / 8;      // 8-key fragments per tile
  constexpr int DF = DMAX / 8;    // 8-column output fragments
  static_assert(RW % 16 == 0 && MF >= 1, "whole 16-row fragments per warp");
  static_assert(BN % 16 == 0 && DMAX % 16 == 0 && STAGES >= 2, "tile shape");
  const float minus_inf = attn_prefill::neg_inf();
  QT_DYNAMIC_SHARED(smem, unsigned char);
  __half* Qs = reinterpret_cast<__half*>(smem);
  __half* Ks = Qs + BM * SD;
  __half* Vs = Ks + STAGES * BN * SD;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, t4 = lane & 3;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;
  const int h = blockIdx.y, kvh = h / (H / KVH);
  const int p0 = max(*pos, 0);
  const int Dp = (D + 15) & ~15, chunks = Dp / 8;
  const int64_t ldq = (int64_t)H * D, ldkv = (int64_t)KVH * D;
  // Keys 0 .. the block's last query position (clamped to the cache so a bad pos stays in bounds).
  const int n_keys = min(C, p0 + min(M, m0 + BM));
  const int ntiles = (n_keys + BN - 1) / BN;
  const __half* kbase = k_cache + kvh * D;
  const __half* vbase = v_cache + kvh * D;

  attn_prefill::load_rows<THREADS, SD>(Qs, q + h * D, BM, m0, M, ldq, D, chunks, tid);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ntiles) {
      attn_prefill::load_rows<THREADS, SD>(Ks + s * BN * SD, kbase, BN, s * BN, n_keys, ldkv, D, chunks, tid);
      attn_prefill::load_rows<THREADS, SD>(Vs + s * BN * SD, vbase, BN, s * BN, n_keys, ldkv, D, chunks, tid);
    }
    qt::cp_async_commit();
  }

  float o[MF][DF][4];
  float row_m[MF][2], row_l[MF][2];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf) {
#pragma unroll
    for (int df = 0; df < DF; ++df)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mf][df][i] = 0.0f;
    row_m[mf][0] = row_m[mf][1] = minus_inf;
    row_l[mf][0] = row_l[mf][1] = 0.0f;
  }

  const float scale = rsqrtf((float)D);
  const int wrow0 = m0 + warp * RW;          // first query row of this warp
  const int wpos_first = p0 + wrow0;          // its position
  const int wpos_last = wpos_first + RW - 1;  // the position of its last row (padding rows included)
  for (int kt = 0; kt < ntiles; ++kt) {
    qt::cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ntiles) {
      const int slot = next % STAGES;
      attn_prefill::load_rows<THREADS, SD>(Ks + slot * BN * SD, kbase, BN, next * BN, n_keys, ldkv, D, chunks, tid);
      attn_prefill::load_rows<THREADS, SD>(Vs + slot * BN * SD, vbase, BN, next * BN, n_keys, ldkv, D, chunks, tid);
    }
    qt::cp_async_commit();
    const int key0 = kt * BN;
    // Skipped (warp-uniform): a tile wholly after this warp's last query, masked for all its rows, and every
    // tile of a warp whose rows are all past M.
    if (key0 > wpos_last || wrow0 >= M) continue;
    const __half* Kt = Ks + (kt % STAGES) * BN * SD;
    const __half* Vt = Vs + (kt % STAGES) * BN * SD;

    float s[MF][NF][4];
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[mf][nf][i] = 0.0f;
#pragma unroll
    for (int kf = 0; kf < DMAX / 16; ++kf) {
      if (kf * 16 < Dp) {
        uint32_t a[MF][4];
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
          qt::ldmatrix_x4(a[mf],
                          qt::smem_u32(Qs + (warp * RW + mf * 16 + (lane & 15)) * SD + kf * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int np = 0; np < NF / 2; ++np) {
          uint32_t b[4];
          qt::ldmatrix_x4(b, qt::smem_u32(Kt + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * SD + kf * 16 +
                                          ((lane >> 3) & 1) * 8));
#pragma unroll
          for (int mf = 0; mf < MF; ++mf) {
            qt::mma_m16n8k16_f16(s[mf][2 * np], a[mf], b, s[mf][2 * np]);
            qt::mma_m16n8k16_f16(s[mf][2 * np + 1], a[mf], b + 2, s[mf][2 * np + 1]);
          }
        }
      }
    }

    // Scale, causal mask where the tile reaches past this warp's first query, online softmax.
    const bool crosses = key0 + BN - 1 > wpos_first;
#pragma unroll
    for (int mf = 0; mf < MF; ++mf) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int qpos = wpos_first + mf * 16 + gid + 8 * hr;
        float mx = minus_inf;
#pragma unroll
        for (int nf = 0; nf < NF; ++nf)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float v = s[mf][nf][2 * hr + e] * scale;
            if (crosses && key0 + nf * 8 + 2 * t4 + e > qpos) v = minus_inf;
            s[mf][nf][2 * hr + e] = v;
            mx = fmaxf(mx, v);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(row_m[mf][hr], mx);
        // A row whose keys so far are all masked keeps m = -inf; subtracting 0 then keeps exp(-inf) = 0.
        const float m_use = m_new == minus_inf ? 0.0f : m_new;
        const float alpha = __expf(row_m[mf][hr] - m_use);
        row_m[mf][hr] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nf = 0; nf < NF; ++nf)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = __expf(s[mf][nf][2 * hr + e] - m_use);
            s[mf][nf][2 * hr + e] = p;
            sum += p;
          }
        row_l[mf][hr] = row_l[mf][hr] * alpha + sum;  // this lane's share; the quad is summed at the end
#pragma unroll
        for (int df = 0; df < DF; ++df) o[mf][df][2 * hr] *= alpha, o[mf][df][2 * hr + 1] *= alpha;
      }
    }

#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[MF][4];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf) {
        a[mf][0] = qt::cvt_f16x2(s[mf][2 * kk][0], s[mf][2 * kk][1]);
        a[mf][1] = qt::cvt_f16x2(s[mf][2 * kk][2], s[mf][2 * kk][3]);
        a[mf][2] = qt::cvt_f16x2(s[mf][2 * kk + 1][0], s[mf][2 * kk + 1][1]);
        a[mf][3] = qt::cvt_f16x2(s[mf][2 * kk + 1][2], s[mf][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < DF / 2; ++dp) {
        if (dp * 16 < Dp) {
          uint32_t b[4];
          qt::ldmatrix_x4_trans(b, qt::smem_u32(Vt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * SD + dp * 16 +
                                                (lane >> 4) * 8));
#pragma unroll
          for (int mf = 0; mf < MF; ++mf) {
            qt::mma_m16n8k16_f16(o[mf][2 * dp], a[mf], b, o[mf][2 * dp]);
            qt::mma_m16n8k16_f16(o[mf][2 * dp + 1], a[mf], b + 2, o[mf][2 * dp + 1]);
          }
        }
      }
    }
  }
  qt::cp_async_wait<0>();

#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = row_l[mf][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv_l = __fdividef(1.0f, l);
      const int row = wrow0 + mf * 16 + gid + 8 * hr;
      if (row < M) {
        __half* dst = out + (int64_t)row * ldq + h * D;
#pragma unroll
        for (int df = 0; df < DF; ++df) {
          const int col = df * 8 + 2 * t4;
          if (df * 8 < D)
            *reinterpret_cast<uint32_t*>(dst + col) =
                qt::cvt_f16x2(o[mf][df][2 * hr] * inv_l, o[mf][df][2 * hr + 1] * inv_l);
        }
      }
    }
}
