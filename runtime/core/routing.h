#pragma once
// Qwen3-MoE router math on the host (transformers Qwen3MoeSparseMoeBlock): fp32 softmax over all experts,
// top-k, optional renormalization. Shared by every backend so expert choice never depends on the device.
#include <cstdint>

namespace qt::rt {

// For each of m rows of `logits` [m][n_experts]: experts[i][j] / weights[i][j] for j < top_k, ordered by
// descending probability (ties: lower expert index first, as torch.topk on CPU returns them).
void route_topk(const float* logits, int64_t m, int64_t n_experts, int64_t top_k, bool renormalize,
                int32_t* experts, float* weights);

}  // namespace qt::rt
