#pragma once
// Upper bounds on header fields. They are far above any real Qwen3 model (Qwen3-235B-A22B: dim 4096,
// 94 layers, 128 experts) and low enough that every size computed from a header fits in 64 bits and
// a hostile header cannot make a reader allocate tables for billions of tensors.
#include <cfloat>
#include <cstdint>

#include "common/value_range.h"

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

// The values validate_config accepts, per field; the flags that set a field (qconvert synthetic, qbench
// --layers, the group sizes of qconvert) accept the same.
inline constexpr IntRange kDimRange{1, kMaxDim};
inline constexpr IntRange kHiddenDimRange{1, kMaxHiddenDim};
inline constexpr IntRange kLayersRange{1, kMaxLayers};
inline constexpr IntRange kHeadsRange{1, kMaxHeads};
inline constexpr IntRange kVocabRange{1, kMaxVocab};
inline constexpr IntRange kSeqLenRange{1, kMaxSeqLen};
inline constexpr IntRange kHeadDimRange{2, kMaxHeadDim};
inline constexpr IntRange kGroupSizeRange{1, kMaxGroupSize};
inline constexpr IntRange kExpertsRange{1, kMaxExperts};
// theta^(-2i/d) is each RoPE pair's frequency: from 1 up it stays within (0, 1]; below 1 it grows past 1 and,
// for a denormal theta, overflows to infinity (the positions' angles become NaN).
inline constexpr RealRange kRopeThetaRange{1, FLT_MAX};
inline constexpr RealRange kRmsEpsRange{0, 1, true, true};
// Tokens of one run: a prompt, the steps generated after it, a context. Never more than a model can hold.
inline constexpr IntRange kTokenCountRange{1, kMaxSeqLen};

}  // namespace qt::limits
