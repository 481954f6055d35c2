#pragma once
// Flash-decoding for one query token at position pos0 = pos[0]: it attends to cache rows 0 .. pos0.
//
// Grid (KVH, splits): block (g, s) serves all R = H / KVH query heads of KV head g (grouped-query attention:
// every K/V row is loaded once for R heads) over split s of the context. The context is cut into TILE-token
// tiles and the tiles into `splits` equal runs, from pos0 at run time, so the grid never depends on pos0; a
// split past the end writes a neutral partial (max -inf, sum 0, acc 0).
//
// Per tile (STAGES-deep cp.async pipeline of K and V tiles in shared memory, rows padded to an odd number of
// 16-byte chunks so threads reading different rows hit different banks):
//   1. scores: one thread per (head, token), a D-long fp32 dot of the fp16 K row with the fp32 query;
//   2. online softmax: one warp per head updates the running max m and sum l and turns scores into p;
//   3. p V: each thread owns (head, 8-column chunk, token group) accumulators in shared memory (the count of
//      them depends on R and D, known only at run time), rescales them by exp(m_old - m_new) and adds its tokens.
// The block's result is either final (one split: out = acc / l in fp16) or a partial (m, l, acc) in the fp32
// workspace; the last of a KV head's split blocks to finish (counted in locks[g], which it resets to 0) combines
// the partials of its R heads in the same launch: a decode step's attention is one launch, not two, which
// matters most at short contexts where a launch costs as much as the KV read.
//
// Workspace layout (splits > 1): ml[splits][H][2] (max, sum), then acc[splits][H][D].
//
// ROPE = 1 takes the decode step's q/k norm + RoPE + KV write (qk_norm_rope_kv) into this launch: q, k and v
// are the token's raw projections. Each block normalizes and rotates its R query heads itself (a few hundred
// elements, from L2), rounding them to fp16 as the separate kernel's q_out holds them. The token's own key and
// value row is the last row of the context, in the last split's last tile and in no other split's, so the block
// of that split writes it to the cache before its first tile load and no block waits for another.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/rope.cuh"
#include "kernels_src/common/splitk.cuh"  // last_block_to_arrive

namespace attn_decode {

// -inf (NVRTC has no INFINITY macro and no constexpr spelling of it).
__device__ __forceinline__ float neg_inf() { return __uint_as_float(0xff800000u); }

// Row stride of a K/V tile in halves: D padded to an odd number of 16-byte chunks (conflict-free row reads).
__device__ __forceinline__ int row_stride(int D) { return ((D / 8) % 2 == 1) ? D : D + 8; }

// Accumulator slots: (head, chunk) pairs times token groups; TG groups share the threads when pairs are few.
__device__ __forceinline__ int token_groups(int pairs, int threads) { return pairs >= threads ? 1 : threads / pairs; }

__device__ __forceinline__ void load_f16x8(const __half* p, float (&out)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
    out[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
  }
}

// cp.async of rows [j0, j0 + TILE) of one KV head into a tile; rows at or past `end` are zero-filled (their
// probabilities are 0, and 0 * NaN from stale shared memory would poison the sum).
template <int THREADS, int TILE>
__device__ __forceinline__ void load_tile(__half* dst, const __half* cache, int j0, int end, int ld, int head_off,
                                          int chunks, int stride, int tid) {
  for (int c = tid; c < TILE * chunks; c += THREADS) {
    const int r = c / chunks, cc = c % chunks;
    const bool ok = j0 + r < end;
    const __half* src = cache + (ok ? (int64_t)(j0 + r) * ld + head_off + cc * 8 : 0);
    qt::cp_async_cg16(qt::smem_u32(dst + r * stride + cc * 8), src, ok ? 16u : 0u);
  }
}

}  // namespace attn_decode

// Minimum one block per SM: without it ptxas (sm_90) trims registers to 64 for occupancy and spills, though
// shared memory already caps the blocks per SM.
// ROPE: k_new, v_new [KVH * D] and the norms' weights q_norm, k_norm [D] (unread otherwise); the caches are
// written at row pos0.
template <int THREADS, int TILE, int STAGES, int ROPE = 0>
__global__ void __launch_bounds__(THREADS, 1)
    attention_decode_kernel(const __half* q, __half* k_cache, __half* v_cache, const int* pos,
                            __half* out, float* ws, unsigned* locks, int H, int KVH, int D, int C, const __half* k_new,
                            const __half* v_new, const float* q_norm, const float* k_norm, float eps, float theta) {
  qt::grid_dependency_entry();
  static_assert(THREADS % 32 == 0 && TILE % 16 == 0 && STAGES >= 2, "block, tile and pipeline shape");
  constexpr int WARPS = THREADS / 32;
  const float minus_inf = attn_decode::neg_inf();
  QT_DYNAMIC_SHARED(smem, unsigned char);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int R = H / KVH, chunks = D / 8, stride = attn_decode::row_stride(D);
  const int pairs = R * chunks, groups = attn_decode::token_groups(pairs, THREADS);
  const int ld = KVH * D, head_off = g * D;

  // Shared memory: K tiles, V tiles (16-byte aligned rows), then fp32 q, scores, accumulators, statistics.
  __half* Ks = reinterpret_cast<__half*>(smem);
  __half* Vs = Ks + STAGES * TILE * stride;
  float* qs = reinterpret_cast<float*>(Vs + STAGES * TILE * stride);
  float* S = qs + R * D;
  float* acc = S + R * TILE;
  float* st_m = acc + groups * pairs * 8;
  float* st_l = st_m + R;
  float* st_a = st_l + R;

  // The context is rows 0 .. pos0; a pos0 outside the cache is clamped so every access stays in bounds.
  const int len = min(max(*pos + 1, 1), C);
  const int tiles = (len + TILE - 1) / TILE;
  const int per_split = (tiles + splits - 1) / splits;
  const int t_begin = min(tiles, split * per_split);
  const int ntiles = min(tiles, t_begin + per_split) - t_begin;

  if constexpr (ROPE) {
    // A warp per head: its sum of squares, then its pairs normalized and rotated as qk_norm_rope_kv does.
    const int position = *pos, half = D / 2;
    const float inv_d = 1.0f / (float)D;
    auto rms = [&](const __half* x) {
      float ss = 0.0f;
      for (int c = lane; c < D; c += 32) {
        const float v = __half2float(x[c]);
        ss += v * v;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      return rsqrtf(ss * inv_d + eps);
    };
    for (int r = warp; r < R; r += WARPS) {
      const __half* x = q + (int64_t)(g * R + r) * D;
      const float inv = rms(x);
      for (int i = lane; i < half; i += 32) {
        float lo, hi;
        qt::rope_norm_rotate(__half2float(x[i]), __half2float(x[half + i]), inv, q_norm[i], q_norm[half + i], i,
                             position, inv_d, theta, lo, hi);
        qs[r * D + i] = __half2float(__float2half_rn(lo));
        qs[r * D + half + i] = __half2float(__float2half_rn(hi));
      }
    }
    // The token's key and value row, by the block whose tiles hold it (rows past the cache are not written).
    const int last_tile = (len - 1) / TILE;
    if (warp == 0 && position >= 0 && position < C && last_tile >= t_begin && last_tile < t_begin + ntiles) {
      const __half* x = k_new + (int64_t)g * D;
      const float inv = rms(x);
      const int64_t row = (int64_t)position * ld + head_off;
      for (int i = lane; i < half; i += 32) {
        float lo, hi;
        qt::rope_norm_rotate(__half2float(x[i]), __half2float(x[half + i]), inv, k_norm[i], k_norm[half + i], i,
                             position, inv_d, theta, lo, hi);
        k_cache[row + i] = __float2half_rn(lo);
        k_cache[row + half + i] = __float2half_rn(hi);
      }
      for (int c = lane; c < D; c += 32) v_cache[row + c] = v_new[(int64_t)g * D + c];
    }
    __syncthreads();  // the row is in the cache before any thread's tile load reads it
  } else {
    for (int i = tid; i < R * D; i += THREADS) qs[i] = __half2float(q[(int64_t)g * R * D + i]);
  }
  for (int i = tid; i < R; i += THREADS) st_m[i] = minus_inf, st_l[i] = 0.0f;
  for (int w = tid; w < groups * pairs; w += THREADS)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[w * 8 + e] = 0.0f;

  // Tile `t` of this split into pipeline slot t % STAGES.
  auto load_stage = [&](int t) {
    const int j0 = (t_begin + t) * TILE, slot = t % STAGES;
    const int off = slot * TILE * stride;
    attn_decode::load_tile<THREADS, TILE>(Ks + off, k_cache, j0, len, ld, head_off, chunks, stride, tid);
    attn_decode::load_tile<THREADS, TILE>(Vs + off, v_cache, j0, len, ld, head_off, chunks, stride, tid);
  };
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ntiles) load_stage(s);
    qt::cp_async_commit();
  }

  const float scale = rsqrtf((float)D);
  for (int t = 0; t < ntiles; ++t) {
    qt::cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (t + STAGES - 1 < ntiles) load_stage(t + STAGES - 1);
    qt::cp_async_commit();
    const __half* Kt = Ks + (t % STAGES) * TILE * stride;
    const __half* Vt = Vs + (t % STAGES) * TILE * stride;
    const int valid = min(TILE, len - (t_begin + t) * TILE);

    // 1. scores
    for (int w = tid; w < R * TILE; w += THREADS) {
      const int r = w / TILE, tt = w % TILE;
      float s = minus_inf;
      if (tt < valid) {
        float dot = 0.0f;
        for (int c = 0; c < chunks; ++c) {
          float kv[8];
          attn_decode::load_f16x8(Kt + tt * stride + c * 8, kv);
          const float4 q0 = *reinterpret_cast<const float4*>(qs + r * D + c * 8);
          const float4 q1 = *reinterpret_cast<const float4*>(qs + r * D + c * 8 + 4);
          dot += q0.x * kv[0] + q0.y * kv[1] + q0.z * kv[2] + q0.w * kv[3];
          dot += q1.x * kv[4] + q1.y * kv[5] + q1.z * kv[6] + q1.w * kv[7];
        }
        s = dot * scale;
      }
      S[w] = s;
    }
    __syncthreads();

    // 2. online softmax, a warp per head
    for (int r = warp; r < R; r += WARPS) {
      float mx = minus_inf;
      for (int tt = lane; tt < TILE; tt += 32) mx = fmaxf(mx, S[r * TILE + tt]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = st_m[r];
      const float m_new = fmaxf(m_old, mx);  // finite: every tile holds at least one valid token
      float sum = 0.0f;
      for (int tt = lane; tt < TILE; tt += 32) {
        const float p = __expf(S[r * TILE + tt] - m_new);  // exp(-inf) = 0 for the padding rows
        S[r * TILE + tt] = p;
        sum += p;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      __syncwarp();  // every lane has read st_m[r]
      if (lane == 0) {
        const float alpha = __expf(m_old - m_new);  // 0 on the first tile (m_old = -inf)
        st_m[r] = m_new;
        st_l[r] = st_l[r] * alpha + sum;
        st_a[r] = alpha;
      }
    }
    __syncthreads();

    // 3. acc = acc * alpha + p V
    for (int w = tid; w < groups * pairs; w += THREADS) {
      const int grp = w / pairs, pr = w % pairs, r = pr / chunks, c = pr % chunks;
      const float alpha = st_a[r];
      float a[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) a[e] = acc[w * 8 + e] * alpha;
      for (int tt = grp; tt < valid; tt += groups) {
        const float p = S[r * TILE + tt];
        float vv[8];
        attn_decode::load_f16x8(Vt + tt * stride + c * 8, vv);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] += p * vv[e];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[w * 8 + e] = a[e];
    }
  }
  qt::cp_async_wait<0>();
  __syncthreads();

  // Token groups summed; the final output, or this split's partial.
  for (int i = tid; i < R * D; i += THREADS) {
    const int r = i / D, d = i % D, pr = r * chunks + d / 8, e = d % 8;
    float sum = 0.0f;
    for (int grp = 0; grp < groups; ++grp) sum += acc[(grp * pairs + pr) * 8 + e];
    const int h = g * R + r;
    if (splits == 1) {
      out[(int64_t)h * D + d] = __float2half_rn(__fdividef(sum, st_l[r]));
    } else {
      if (d == 0) {
        ws[2 * ((int64_t)split * H + h)] = st_m[r];
        ws[2 * ((int64_t)split * H + h) + 1] = st_l[r];
      }
      ws[(int64_t)splits * H * 2 + ((int64_t)split * H + h) * D + d] = sum;
    }
  }
  if (splits == 1) return;

  // The last split block of KV head g: out[h][d] = sum_s e^(m_s - M) acc_s[h][d] / sum_s e^(m_s - M) l_s,
  // M = max_s m_s, for its R heads; neutral partials (m = -inf) weigh 0. A thread takes four adjacent columns of
  // one head, and the loops over the splits are unrolled and branch-free, so a thread has several splits' loads in
  // flight. The loop this replaces branched on each split's max before loading its partial, for one column a
  // thread: every load waited on the one before, about a microsecond a split (the H200 run of 29 Nov: 85 us at
  // 4K tokens and 64 splits, where the KV read alone takes 5). The same sums in the same order: bit for bit.
  if (!last_block_to_arrive(&locks[g], (unsigned)splits)) return;
  const float* ml = ws;
  const float* pacc = ws + (int64_t)splits * H * 2;
  const int quads = D / 4;  // D is a multiple of 8
  for (int i = tid; i < R * quads; i += THREADS) {
    const int h = g * R + i / quads, d = (i % quads) * 4;
    float mx = minus_inf;
#pragma unroll 4
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, ml[2 * ((int64_t)s * H + h)]);
    float l = 0.0f, sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
    for (int s = 0; s < splits; ++s) {
      const float* m_l = ml + 2 * ((int64_t)s * H + h);
      const float* a = pacc + ((int64_t)s * H + h) * D + d;
      const float m = m_l[0];
      const float w = m == minus_inf ? 0.0f : __expf(m - mx);
      l += m_l[1] * w;
#pragma unroll
      for (int e = 0; e < 4; ++e) sum[e] += a[e] * w;
    }
    const float inv = __fdividef(1.0f, l);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[(int64_t)h * D + d + e] = __float2half_rn(sum[e] * inv);
  }
}
