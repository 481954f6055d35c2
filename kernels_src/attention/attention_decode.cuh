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
//
// attention_decode_mma_kernel: the same grid, tiles, pipeline, partials and combine, with the tile's work on tensor
// cores. The CUDA-core kernel above issues about 420 warp instructions per KB of K and V (PTX, D = 128: each thread
// a D-long dot from shared memory, then 8-column p V sums, three block barriers a tile), which caps it near
// 2.5 TB/s on an H200 at any split count; this one issues about 90 (16 + 16 mma and 16 ldmatrix for 16 tokens).
//   Q: the R query heads as the rows of a 16-row A operand (rows R .. 15 zero), held in registers for the launch;
//   S = Q K^T: each warp takes 16-token slices of the tile (warp w: slices w, w + WARPS, ...), K rows through
//      ldmatrix (B column-major in the token), fp32 accumulators;
//   a warp's own online softmax on its fragments (the 4 lanes of a quad share a head), P rounded to fp16 into
//      the A operand of O += P V (V through ldmatrix.trans), O in registers: one block barrier a tile;
//   after the last tile the warps' (m, l, O) meet in shared memory (the drained K/V ring) and become the
//      block's result, final or partial, as the CUDA-core kernel's are.
// D must be a multiple of 16, at most 128, and R = H / KVH at most 16 (decode_family.cpp's shape constraint).
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
// probabilities are 0, and 0 * NaN from stale shared memory would poison the sum). At D = 128 (16 chunks a row,
// every Qwen3 size) each thread keeps one column and steps down the rows by a constant: the division and remainder
// of a chunk index cost more instructions than the copy's own (PTX: 28 a copy against 6).
template <int THREADS, int TILE, int CHUNKS>
__device__ __forceinline__ void load_tile_rows(__half* dst, const __half* cache, int j0, int end, int ld, int head_off,
                                               int stride, int tid) {
  constexpr int STEP = THREADS / CHUNKS;
  const int cc = tid % CHUNKS, r0 = tid / CHUNKS;
  const int in_context = end - j0 - r0;  // this thread's rows i * STEP below it are in the context
  const int64_t row_step = (int64_t)STEP * ld;
  const __half* src = cache + (int64_t)(j0 + r0) * ld + head_off + cc * 8;
  const uint32_t to = qt::smem_u32(dst + r0 * stride + cc * 8);
#pragma unroll
  for (int i = 0; i < TILE / STEP; ++i) {
    const bool ok = i * STEP < in_context;
    qt::cp_async_cg16(to + i * STEP * stride * 2, ok ? src : cache, ok ? 16u : 0u);
    src += row_step;
  }
}

template <int THREADS, int TILE>
__device__ __forceinline__ void load_tile(__half* dst, const __half* cache, int j0, int end, int ld, int head_off,
                                          int chunks, int stride, int tid) {
  if constexpr (THREADS % 16 == 0 && TILE % (THREADS / 16) == 0) {
    if (chunks == 16) {
      load_tile_rows<THREADS, TILE, 16>(dst, cache, j0, end, ld, head_off, stride, tid);
      return;
    }
  }
  for (int c = tid; c < TILE * chunks; c += THREADS) {
    const int r = c / chunks, cc = c % chunks;
    const bool ok = j0 + r < end;
    const __half* src = cache + (ok ? (int64_t)(j0 + r) * ld + head_off + cc * 8 : 0);
    qt::cp_async_cg16(qt::smem_u32(dst + r * stride + cc * 8), src, ok ? 16u : 0u);
  }
}

// A split's run of tiles: the context is rows 0 .. pos0 (a pos0 outside the cache is clamped so every access stays
// in bounds), cut into TILE-token tiles and the tiles into `splits` equal runs; a split past the end has none.
struct SplitRange {
  int len, t_begin, ntiles;
};
template <int TILE>
__device__ __forceinline__ SplitRange split_range(const int* pos, int C, int split, int splits) {
  SplitRange r;
  r.len = min(max(*pos + 1, 1), C);
  const int tiles = (r.len + TILE - 1) / TILE;
  const int per_split = (tiles + splits - 1) / splits;
  r.t_begin = min(tiles, split * per_split);
  r.ntiles = min(tiles, r.t_begin + per_split) - r.t_begin;
  return r;
}

// Tile t of the split's run, K and V, into ring slot t % STAGES.
template <int THREADS, int TILE, int STAGES>
__device__ __forceinline__ void load_stage(__half* Ks, __half* Vs, const __half* k_cache, const __half* v_cache, int t,
                                           const SplitRange& r, int ld, int head_off, int chunks, int stride, int tid) {
  const int j0 = (r.t_begin + t) * TILE, off = (t % STAGES) * TILE * stride;
  load_tile<THREADS, TILE>(Ks + off, k_cache, j0, r.len, ld, head_off, chunks, stride, tid);
  load_tile<THREADS, TILE>(Vs + off, v_cache, j0, r.len, ld, head_off, chunks, stride, tid);
}

// The ring's first STAGES - 1 tiles, a commit group each (empty past the run), so that cp_async_wait<STAGES - 2>
// before tile t means tile t has landed.
template <int THREADS, int TILE, int STAGES>
__device__ __forceinline__ void fill_ring(__half* Ks, __half* Vs, const __half* k_cache, const __half* v_cache,
                                          const SplitRange& r, int ld, int head_off, int chunks, int stride, int tid) {
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < r.ntiles) load_stage<THREADS, TILE, STAGES>(Ks, Vs, k_cache, v_cache, s, r, ld, head_off, chunks, stride, tid);
    qt::cp_async_commit();
  }
}

// Tile t of the run in the ring: its K and V rows and the count of them in the context.
struct RingTile {
  const __half* k;
  const __half* v;
  int valid;
};
// For the whole block: waits for every thread's copies of tile t (and for every warp to be done with the slot
// reloaded next), issues tile t + STAGES - 1, and returns tile t.
template <int THREADS, int TILE, int STAGES>
__device__ __forceinline__ RingTile ring_tile(__half* Ks, __half* Vs, const __half* k_cache, const __half* v_cache,
                                              int t, const SplitRange& r, int ld, int head_off, int chunks, int stride,
                                              int tid) {
  qt::cp_async_wait<STAGES - 2>();
  __syncthreads();
  if (t + STAGES - 1 < r.ntiles)
    load_stage<THREADS, TILE, STAGES>(Ks, Vs, k_cache, v_cache, t + STAGES - 1, r, ld, head_off, chunks, stride, tid);
  qt::cp_async_commit();
  const int slot = (t % STAGES) * TILE * stride;
  return {Ks + slot, Vs + slot, min(TILE, r.len - (r.t_begin + t) * TILE)};
}

// The block's R query heads of KV head g in fp32 shared memory qs[R][D]. ROPE: the raw projections normalized and
// rotated (a warp per head, as qk_norm_rope_kv does, rounded to fp16 as its q_out holds them), and the token's key
// and value row written to the cache by the block whose run of tiles `run` holds it, followed by a block barrier so
// no thread's tile load reads the row before it is written. Without ROPE no barrier: the caller's first barrier
// follows.
template <int THREADS, int TILE, int ROPE>
__device__ __forceinline__ void queries_to_shared(float* qs, const __half* q, __half* k_cache, __half* v_cache,
                                                  const int* pos, int g, int R, int D, int C, int KVH,
                                                  const SplitRange& run, const __half* k_new, const __half* v_new,
                                                  const float* q_norm, const float* k_norm, float eps, float theta) {
  constexpr int WARPS = THREADS / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if constexpr (ROPE) {
    const int position = *pos, half = D / 2, ld = KVH * D, head_off = g * D;
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
    const int last_tile = (run.len - 1) / TILE;
    if (warp == 0 && position >= 0 && position < C && last_tile >= run.t_begin && last_tile < run.t_begin + run.ntiles) {
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
}

// One element of the block's result for head h, column d: the output itself (one split: sum / l in fp16) or the
// split's partial in the workspace, ml[splits][H][2] then acc[splits][H][D].
__device__ __forceinline__ void store_result(__half* out, float* ws, int H, int D, int split, int splits, int h,
                                             int d, float sum, float m, float l) {
  if (splits == 1) {
    out[(int64_t)h * D + d] = __float2half_rn(__fdividef(sum, l));
    return;
  }
  if (d == 0) {
    ws[2 * ((int64_t)split * H + h)] = m;
    ws[2 * ((int64_t)split * H + h) + 1] = l;
  }
  ws[(int64_t)splits * H * 2 + ((int64_t)split * H + h) * D + d] = sum;
}

// The last split block of KV head g: out[h][d] = sum_s w_s acc_s[h][d] / sum_s w_s l_s, w_s = e^(m_s - M),
// M = max_s m_s, for its R heads; neutral partials (m = -inf) weigh 0. First a warp per head reads every split's
// (m, l) at once (a lane per split), reduces M and the sum by shuffles and leaves the weights in shared memory
// `weights` [R][splits], each head's 1 / sum after them; then a thread per four adjacent columns of a head sums
// the splits' partials, 8 splits' loads in flight at a time, none waiting on another. That is three round trips
// to the L2 and splits / 8 more. The loop before it (29 Nov) walked the splits' maxima and then their partials 4
// splits at a time: splits / 2 round trips, 32 at 64 splits, about 10 us of a 4K-token context's attention whose
// read takes 4 us on an H200. (The loop before that one branched on each split's max before loading its partial,
// one column a thread: about a microsecond a split, 85 us at 4K tokens and 64 splits on the H200 of 29 Nov.)
// A block-wide call after every thread's store_result.
template <int THREADS>
__device__ __forceinline__ void combine_splits(__half* out, const float* ws, unsigned* locks, float* weights, int g,
                                               int H, int R, int D, int splits) {
  if (!last_block_to_arrive(&locks[g], (unsigned)splits)) return;
  constexpr int WARPS = THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float minus_inf = neg_inf();
  const float* ml = ws;
  const float* pacc = ws + (int64_t)splits * H * 2;
  float* inv_sum = weights + R * splits;
  for (int r = warp; r < R; r += WARPS) {
    const int64_t h = g * R + r;
    float mx = minus_inf;
    for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, ml[2 * (s * H + h)]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float l = 0.0f;
    for (int s = lane; s < splits; s += 32) {
      const float m = ml[2 * (s * H + h)];
      const float w = m == minus_inf ? 0.0f : __expf(m - mx);
      l += ml[2 * (s * H + h) + 1] * w;
      weights[r * splits + s] = w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) inv_sum[r] = __fdividef(1.0f, l);
  }
  __syncthreads();
  const int quads = D / 4;  // D is a multiple of 8
  for (int i = threadIdx.x; i < R * quads; i += THREADS) {
    const int r = i / quads, d = (i % quads) * 4;
    const int64_t h = g * R + r;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
    for (int s = 0; s < splits; ++s) {
      const float4 a = *reinterpret_cast<const float4*>(pacc + (s * H + h) * D + d);
      const float w = weights[r * splits + s];
      sum[0] += a.x * w, sum[1] += a.y * w, sum[2] += a.z * w, sum[3] += a.w * w;
    }
    const float inv = inv_sum[r];
#pragma unroll
    for (int e = 0; e < 4; ++e) out[h * D + d + e] = __float2half_rn(sum[e] * inv);
  }
}

// The tensor-core kernel's K and V ring in halves, at least the WARPS x R rows of max, sum and D accumulators that
// reuse it after the last tile, rounded to 16 bytes.
__device__ __forceinline__ int mma_ring_halves(int warps, int tile, int stages, int R, int D, int stride) {
  const int ring = 2 * stages * tile * stride, results = warps * R * (D + 2) * 2;
  return ((ring > results ? ring : results) + 7) & ~7;
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
  float* combine_weights = st_a + R;  // [R][splits] and R sums (combine_splits)

  const attn_decode::SplitRange range = attn_decode::split_range<TILE>(pos, C, split, splits);
  attn_decode::queries_to_shared<THREADS, TILE, ROPE>(qs, q, k_cache, v_cache, pos, g, R, D, C, KVH, range, k_new,
                                                     v_new, q_norm, k_norm, eps, theta);
  for (int i = tid; i < R; i += THREADS) st_m[i] = minus_inf, st_l[i] = 0.0f;
  for (int w = tid; w < groups * pairs; w += THREADS)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[w * 8 + e] = 0.0f;

  attn_decode::fill_ring<THREADS, TILE, STAGES>(Ks, Vs, k_cache, v_cache, range, ld, head_off, chunks, stride, tid);

  const float scale = rsqrtf((float)D);
  for (int t = 0; t < range.ntiles; ++t) {
    const attn_decode::RingTile tile = attn_decode::ring_tile<THREADS, TILE, STAGES>(
        Ks, Vs, k_cache, v_cache, t, range, ld, head_off, chunks, stride, tid);
    const __half *Kt = tile.k, *Vt = tile.v;
    const int valid = tile.valid;

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
    attn_decode::store_result(out, ws, H, D, split, splits, g * R + r, d, sum, st_m[r], st_l[r]);
  }
  if (splits == 1) return;
  attn_decode::combine_splits<THREADS>(out, ws, locks, combine_weights, g, H, R, D, splits);
}

// Shared memory (dynamic): the K and V ring as above, sized at least for the warps' results that reuse it
// (attn_decode::mma_ring_halves); then the 16 query rows in fp16 (the A operand, rows R .. 15 zero), the R rows in
// fp32 the prologue writes and, with splits, the combine's weights. decode_family.cpp's decode_smem_bytes mirrors it.
template <int THREADS, int TILE, int STAGES, int ROPE = 0>
__global__ void __launch_bounds__(THREADS, 1)
    attention_decode_mma_kernel(const __half* q, __half* k_cache, __half* v_cache, const int* pos, __half* out,
                                float* ws, unsigned* locks, int H, int KVH, int D, int C, const __half* k_new,
                                const __half* v_new, const float* q_norm, const float* k_norm, float eps,
                                float theta) {
  qt::grid_dependency_entry();
  static_assert(THREADS % 32 == 0 && TILE % 16 == 0 && STAGES >= 2, "block, tile and pipeline shape");
  constexpr int WARPS = THREADS / 32, SLICES = TILE / 16;
  constexpr int DMAX = 128, KF = DMAX / 16, DF = DMAX / 8;  // registers sized for the largest head dim
  const float minus_inf = attn_decode::neg_inf();
  QT_DYNAMIC_SHARED(smem, unsigned char);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, t4 = lane & 3;
  const int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int R = H / KVH, chunks = D / 8, stride = attn_decode::row_stride(D), kf_n = D / 16;
  const int ld = KVH * D, head_off = g * D;

  __half* Ks = reinterpret_cast<__half*>(smem);
  __half* Vs = Ks + STAGES * TILE * stride;
  __half* Qh = Ks + attn_decode::mma_ring_halves(WARPS, TILE, STAGES, R, D, stride);
  float* qs = reinterpret_cast<float*>(Qh + 16 * stride);
  float* combine_weights = qs + R * D;  // [R][splits] and R sums (combine_splits)

  const attn_decode::SplitRange range = attn_decode::split_range<TILE>(pos, C, split, splits);
  attn_decode::queries_to_shared<THREADS, TILE, ROPE>(qs, q, k_cache, v_cache, pos, g, R, D, C, KVH, range, k_new,
                                                     v_new, q_norm, k_norm, eps, theta);
  attn_decode::fill_ring<THREADS, TILE, STAGES>(Ks, Vs, k_cache, v_cache, range, ld, head_off, chunks, stride, tid);

  // The queries as a 16-row A operand, in registers for the whole launch (their values are fp16 already).
  __syncthreads();  // qs written by every warp
  for (int i = tid; i < 16 * D; i += THREADS) {
    const int r = i / D, d = i % D;
    Qh[r * stride + d] = __float2half_rn(r < R ? qs[r * D + d] : 0.0f);
  }
  __syncthreads();
  uint32_t qa[KF][4];
#pragma unroll
  for (int kf = 0; kf < KF; ++kf) {
    qa[kf][0] = qa[kf][1] = qa[kf][2] = qa[kf][3] = 0u;
    if (kf < kf_n) qt::ldmatrix_x4(qa[kf], qt::smem_u32(Qh + (lane & 15) * stride + kf * 16 + (lane >> 4) * 8));
  }

  // This warp's running max and sum of heads gid and gid + 8 (this lane's share of the quad's tokens), and its
  // O rows in C-fragment order.
  float o[DF][4];
#pragma unroll
  for (int df = 0; df < DF; ++df) o[df][0] = o[df][1] = o[df][2] = o[df][3] = 0.0f;
  float row_m[2] = {minus_inf, minus_inf}, row_l[2] = {0.0f, 0.0f};
  const float scale = rsqrtf((float)D);  // the scores' scale, applied in fp32 to the accumulators

  for (int t = 0; t < range.ntiles; ++t) {
    const attn_decode::RingTile tile = attn_decode::ring_tile<THREADS, TILE, STAGES>(
        Ks, Vs, k_cache, v_cache, t, range, ld, head_off, chunks, stride, tid);
    for (int sl = warp; sl < SLICES; sl += WARPS) {
      const int tok0 = sl * 16;
      if (tok0 >= tile.valid) break;  // warp-uniform: the rest of the tile is past the context
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int kf = 0; kf < KF; ++kf) {
        if (kf < kf_n) {
          uint32_t b[4];
          qt::ldmatrix_x4(b, qt::smem_u32(tile.k + (tok0 + (lane & 7) + ((lane >> 4) << 3)) * stride + kf * 16 +
                                          ((lane >> 3) & 1) * 8));
          qt::mma_m16n8k16_f16(s[0], qa[kf], b, s[0]);
          qt::mma_m16n8k16_f16(s[1], qa[kf], b + 2, s[1]);
        }
      }
      // Online softmax over the slice's tokens: token tok0 is in the context, so every row's max is finite.
      float alphas[2];
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = minus_inf;
#pragma unroll
        for (int nf = 0; nf < 2; ++nf)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float v = s[nf][2 * hr + e] * scale;
            if (tok0 + nf * 8 + 2 * t4 + e >= tile.valid) v = minus_inf;
            s[nf][2 * hr + e] = v;
            mx = fmaxf(mx, v);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(row_m[hr], mx);
        const float alpha = __expf(row_m[hr] - m_new);  // 0 on the warp's first slice (m = -inf)
        row_m[hr] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nf = 0; nf < 2; ++nf)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = __expf(s[nf][2 * hr + e] - m_new);  // exp(-inf) = 0 past the context
            s[nf][2 * hr + e] = p;
            sum += p;
          }
        row_l[hr] = row_l[hr] * alpha + sum;
        alphas[hr] = alpha;
      }
      // O rescaled only when some head's max moved (alpha = 1 exactly otherwise): past the first slices of a long
      // context it seldom does, and the rescale is 64 multiplies a lane against the slice's 32 mma.
      if (__any_sync(0xffffffffu, alphas[0] != 1.0f || alphas[1] != 1.0f)) {
#pragma unroll
        for (int df = 0; df < DF; ++df)
#pragma unroll
          for (int i = 0; i < 4; ++i) o[df][i] *= alphas[i / 2];
      }
      // O += P V: the score fragments of the slice's two 8-token halves are the A operand of one k-step.
      uint32_t a[4];
      a[0] = qt::cvt_f16x2(s[0][0], s[0][1]);
      a[1] = qt::cvt_f16x2(s[0][2], s[0][3]);
      a[2] = qt::cvt_f16x2(s[1][0], s[1][1]);
      a[3] = qt::cvt_f16x2(s[1][2], s[1][3]);
#pragma unroll
      for (int dp = 0; dp < DF / 2; ++dp) {
        if (dp < kf_n) {
          uint32_t b[4];
          qt::ldmatrix_x4_trans(b, qt::smem_u32(tile.v + (tok0 + (lane & 7) + ((lane >> 3) & 1) * 8) * stride + dp * 16 +
                                                (lane >> 4) * 8));
          qt::mma_m16n8k16_f16(o[2 * dp], a, b, o[2 * dp]);
          qt::mma_m16n8k16_f16(o[2 * dp + 1], a, b + 2, o[2 * dp + 1]);
        }
      }
    }
  }
  qt::cp_async_wait<0>();
  __syncthreads();  // every warp is done with the ring: it now takes the warps' results

  float* wm = reinterpret_cast<float*>(smem);  // [WARPS][R] max
  float* wl = wm + WARPS * R;                   // [WARPS][R] sum
  float* wo = wl + WARPS * R;                   // [WARPS][R][D] accumulators
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float l = row_l[hr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = gid + 8 * hr;
    if (r < R) {
      if (t4 == 0) wm[warp * R + r] = row_m[hr], wl[warp * R + r] = l;
      float* dst = wo + (int64_t)(warp * R + r) * D;
#pragma unroll
      for (int df = 0; df < DF; ++df)
        if (df < 2 * kf_n) dst[df * 8 + 2 * t4] = o[df][2 * hr], dst[df * 8 + 2 * t4 + 1] = o[df][2 * hr + 1];
    }
  }
  __syncthreads();
  // The block's result: the warps' (m, l, O) combined as the splits' are; a warp that saw no token weighs 0.
  for (int i = tid; i < R * D; i += THREADS) {
    const int r = i / D, d = i % D;
    float mx = minus_inf;
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, wm[w * R + r]);
    float l = 0.0f, sum = 0.0f;
    for (int w = 0; w < WARPS; ++w) {
      const float m = wm[w * R + r];
      const float c = m == minus_inf ? 0.0f : __expf(m - mx);
      l += wl[w * R + r] * c;
      sum += wo[(int64_t)(w * R + r) * D + d] * c;
    }
    attn_decode::store_result(out, ws, H, D, split, splits, g * R + r, d, sum, mx, l);
  }
  if (splits == 1) return;
  attn_decode::combine_splits<THREADS>(out, ws, locks, combine_weights, g, H, R, D, splits);
}
