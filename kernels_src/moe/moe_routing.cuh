#pragma once
// Qwen3-MoE routing on the device, every step deterministic (no result depends on thread scheduling):
//   moe_gating_kernel    router logits -> top-k expert ids and weights (one warp per token);
//   moe_place_kernel     the routed rows grouped by expert: init routing's sorted rows and scatter index,
//                        or vLLM-style block alignment (each expert padded to BLOCK rows, a block->expert map);
//   moe_expand_kernel    init routing's expanded rows, optionally int8-quantized per row;
//   moe_finalize_kernel  each token's k expert outputs weighted and summed.
// CPU definitions: kernels_src/moe/moe_reference.h.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/qt_vec.h"
#include "kernels_src/moe/moe_topk.cuh"

// Warp w of a block handles token blockIdx.x * WARPS + w (moe_topk.cuh: lane l holds experts l, l+32, ..., EPL
// per lane, so E <= 32 * EPL, and K <= 32).
template <int WARPS, int EPL>
__global__ void __launch_bounds__(WARPS * 32)
    moe_gating_kernel(const __half* __restrict__ logits, int* __restrict__ ids, float* __restrict__ weights, int M,
                      int E, int K, int renormalize) {
  qt::grid_dependency_entry();
  const int lane = threadIdx.x & 31, row = blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (row >= M) return;
  int id;
  float w;
  moe_topk_warp<EPL>(logits + (int64_t)row * E, E, K, renormalize, lane, id, w);
  if (lane < K) {
    ids[(int64_t)row * K + lane] = id;
    weights[(int64_t)row * K + lane] = w;
  }
}

// Groups the routed rows i < count (ids[i] = expert) by expert, stable in i. Only experts in [start, end) take
// part. Each expert's rows are padded up to a multiple of `block` (1 = no padding). Outputs:
//   sorted[slot]        routed row of each slot, `sentinel` in padding and past the total (cap slots);
//   position[i]         slot of routed row i, -1 when its expert is outside the range;
//   counts[e - start]   rows of each expert of the range (may be null);
//   pairs, pairs_used   (expert, rows) for the experts of the range with any rows, zeros after (may be null);
//   block_expert[b]     the expert of block b of `block` slots, -1 past the total (may be null);
//   total[0]            slots used (the padded total; with block 1, the active rows).
// Every block recounts the experts in shared memory, so blocks never wait on each other; warp w of block b
// places expert b * WARPS + w by scanning the ids 32 at a time with a ballot.
template <int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    moe_place_kernel(const int* __restrict__ ids, int* __restrict__ sorted, int* __restrict__ position,
                     long long* __restrict__ counts, long long* __restrict__ pairs, int* __restrict__ pairs_used,
                     int* __restrict__ block_expert, int* __restrict__ total, int count, int E, int start, int end,
                     int block, int cap, int sentinel) {
  qt::grid_dependency_entry();
  constexpr int THREADS = WARPS * 32;
  QT_SHARED(cnt, int[1024]);
  QT_SHARED(off, int[1025]);
  const int tid = threadIdx.x, lane = tid & 31;
  for (int e = tid; e < E; e += THREADS) cnt[e] = 0;
  __syncthreads();
  for (int i = tid; i < count; i += THREADS) {
    const int e = ids[i];
    if (e >= start && e < end) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int o = 0;
    for (int e = 0; e < E; ++e) off[e] = o, o += (cnt[e] + block - 1) / block * block;
    off[E] = o;
  }
  __syncthreads();
  const int e = blockIdx.x * WARPS + (tid >> 5);
  if (e >= start && e < end) {
    const int base = off[e];
    int placed = 0;
    for (int i0 = 0; i0 < count; i0 += 32) {
      const int i = i0 + lane;
      const bool hit = i < count && ids[i] == e;
      const unsigned mask = __ballot_sync(0xffffffffu, hit);
      if (hit) {
        const int slot = base + placed + __popc(mask & ((1u << lane) - 1u));
        sorted[slot] = i;
        position[i] = slot;
      }
      placed += __popc(mask);
    }
    for (int s = base + placed + lane; s < off[e + 1]; s += 32) sorted[s] = sentinel;
    if (block_expert != nullptr)
      for (int b = base / block + lane; b < off[e + 1] / block; b += 32) block_expert[b] = e;
    if (lane == 0 && counts != nullptr) counts[e - start] = cnt[e];
  }
  if (blockIdx.x == 0) {
    for (int s = off[E] + tid; s < cap; s += THREADS) sorted[s] = sentinel;
    if (block_expert != nullptr)
      for (int b = off[E] / block + tid; b < cap / block; b += THREADS) block_expert[b] = -1;
    for (int i = tid; i < count; i += THREADS) {
      const int x = ids[i];
      if (x < start || x >= end) position[i] = -1;
    }
    if (tid == 0) {
      total[0] = off[E];
      if (pairs != nullptr) {
        int used = 0;
        for (int x = start; x < end; ++x)
          if (cnt[x] > 0) pairs[2 * used] = x, pairs[2 * used + 1] = cnt[x], ++used;
        for (int x = used; x < end - start; ++x) pairs[2 * x] = 0, pairs[2 * x + 1] = 0;
        pairs_used[0] = used;
      }
    }
  }
}

// Block p copies the token row of sorted slot p (routed row sorted[p], token sorted[p] / top_k) into row p of
// the expanded rows; rows past total[0] are cleared. `quant`: the row as int8 with scale max|x| / 127, rounded
// half away from zero, and the scale in scale[p] (0 for an all-zero row).
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    moe_expand_kernel(const __half* __restrict__ x, const int* __restrict__ sorted, const int* __restrict__ total,
                      __half* __restrict__ out, signed char* __restrict__ q, float* __restrict__ scale, int top_k,
                      int H, int quant) {
  qt::grid_dependency_entry();
  const int p = blockIdx.x, tid = threadIdx.x;
  if (p >= total[0]) {
    for (int c = tid; c < H; c += THREADS) {
      if (quant) q[(int64_t)p * H + c] = 0;
      else out[(int64_t)p * H + c] = __float2half_rn(0.0f);
    }
    if (quant && tid == 0) scale[p] = 0.0f;
    return;
  }
  const __half* row = x + (int64_t)(sorted[p] / top_k) * H;
  if (!quant) {
    for (int c = tid; c < H; c += THREADS) out[(int64_t)p * H + c] = row[c];
    return;
  }
  float amax = 0.0f;
  for (int c = tid; c < H; c += THREADS) amax = fmaxf(amax, fabsf(__half2float(row[c])));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  QT_SHARED(warp_max, float[THREADS / 32]);
  if ((tid & 31) == 0) warp_max[tid >> 5] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < THREADS / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float s = amax / 127.0f;
  if (tid == 0) scale[p] = s;
  for (int c = tid; c < H; c += THREADS)
    q[(int64_t)p * H + c] = s > 0.0f ? (signed char)roundf(__half2float(row[c]) / s) : (signed char)0;
}

// Block (t, s) sums token t's k expert outputs over its share of the columns: out[t][c] = sum_j w[t][j] *
// y[rows[t*K + j]][c] in fp32 (j in order), VEC columns per thread and access. The columns are spread over
// gridDim.y blocks so that a decode step's one token is not one block's chain of K loads per column step.
// RESIDUAL = 1: out is the hidden state and the MoE block's output is added to it in place,
// out = fp16(out + fp16(sum)), the roundings of the separate finalize and residual add (each element is read
// and written by the one thread that sums it).
template <int THREADS, int VEC, int RESIDUAL = 0>
__global__ void __launch_bounds__(THREADS)
    moe_finalize_kernel(const __half* __restrict__ y, const int* __restrict__ rows, const float* __restrict__ weights,
                        __half* __restrict__ out, int K, int H) {
  qt::grid_dependency_entry();
  const int t = blockIdx.x;
  for (int c = ((int)blockIdx.y * THREADS + (int)threadIdx.x) * VEC; c < H; c += (int)gridDim.y * THREADS * VEC) {
    float acc[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = 0.0f;
    for (int j = 0; j < K; ++j) {
      const float w = weights[(int64_t)t * K + j];
      float src[VEC];
      qt::load_f16<VEC>(y + (int64_t)rows[(int64_t)t * K + j] * H + c, src);
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] += w * src[v];
    }
    if constexpr (RESIDUAL) {
      float prev[VEC];
      qt::load_f16<VEC>(out + (int64_t)t * H + c, prev);
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = prev[v] + __half2float(__float2half_rn(acc[v]));
    }
    qt::store_f16<VEC>(out + (int64_t)t * H + c, acc);
  }
}
