#pragma once
// Attention over the fp16 KV cache that qk_norm_rope_kv fills (sources in this folder). Both families take
// dims {M, H, KVH, D, C, P} and buffers "q" [M][H*D], "k_cache" / "v_cache" [C][KVH*D], "pos" (i32, pos0: the
// tokens cached before this call) and write "out" [M][H*D]; query i sits at position pos0 + i and attends to
// cache rows 0 .. pos0 + i, scaled by D^-0.5, softmax in fp32.
//   attention_decode   M = 1: flash-decoding, context split over blocks (`splits`, combined by the last block), one
//                      block per KV head serving its H/KVH query heads (GQA)
//   attention_prefill  any M: causal flash attention on tensor cores (ldmatrix + mma.m16n8k16, fp32 online
//                      softmax), head dims up to `dmax`
#include <cstdint>

#include "kernels_src/registry/family.h"

namespace qt::kernels::attention {

const KernelFamily& decode_family();
// attention_decode_rope, op "rope_attention_decode": attention_decode on the step's raw q, k and v, with their
// norm, RoPE and the cache write (qk_norm_rope_kv at M = 1) in the same launch.
const KernelFamily& decode_rope_family();
const KernelFamily& prefill_family();

// The shape attention is chosen by, for m queries that end at `tokens` of context in a cache of `capacity` rows:
// the context's power-of-two bucket (at most the capacity) as a cache of that many rows, the queries at its end.
// The kernels read the true position from device memory, so any bucket's choice is correct at any position;
// the capacity a run reserves changes no work. DeviceBackend chooses by it, the tuner measures at it
// (model_shapes), the step model predicts and qbench --report times with it.
Shape choice_shape(int64_t m, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t tokens,
                   int64_t capacity = INT64_MAX);

// The untuned decode split count for `tokens` of context and `kv_heads` blocks per split: the largest power of
// two up to kMaxDefaultSplits that keeps the grid within kDefaultBlocks (about four blocks per SM of a
// 108-132-SM GPU, so every SM streams the cache) and gives each split at least kMinTokensPerSplit tokens (half
// a tile of the default's 32: a block's time is a chain of tile loads, so even at short contexts the static
// model prefers one tile per block, as the fixed 8 splits gave at 128 tokens).
inline constexpr int64_t kMaxDefaultSplits = 64, kDefaultBlocks = 512, kMinTokensPerSplit = 16;
int64_t splits_for_context(int64_t tokens, int64_t kv_heads);

// Dynamic shared memory of a point (decode also depends on the GQA ratio and head dim of the shape).
int64_t decode_smem_bytes(const Point& p, int64_t heads_per_kv, int64_t head_dim);
int64_t prefill_smem_bytes(const Point& p);

}  // namespace qt::kernels::attention
