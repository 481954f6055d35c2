#pragma once
// Upper bounds on header fields. They are far above any real Qwen3 model (Qwen3-235B-A22B: dim 4096,
// 94 layers, 128 experts) and low enough that every size computed from a header fits in 64 bits and
// a hostile header cannot make a reader allocate tables for billions of tensors.
#include <cstdint>

namespace qt::limits {

inline constexpr int64_t kMaxDim = 1 << 16;        // dim and n_heads * head_dim
inline constexpr int64_t kMaxHiddenDim = 1 << 18;  // intermediate_size / moe_intermediate_size
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxVocab = 1 << 22;
inline constexpr int64_t kMaxSeqLen = 1 << 24;
inline constexpr int64_t kMaxHeadDim = 4096;
inline constexpr int64_t kMaxGroupSize = 1 << 16;
inline constexpr int64_t kMaxExperts = 1024;

}  // namespace qt::limits
