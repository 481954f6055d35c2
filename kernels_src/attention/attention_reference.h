#pragma once
// CPU reference of causal softmax attention over an fp16 KV cache, in double: query row i (position pos0 + i)
// of head h attends to cache rows 0 .. pos0 + i of KV head h / (H / KVH), scores scaled by D^-0.5.
#include <cstdint>
#include <vector>

namespace qt::kernels::attention {

struct AttentionProblem {
  int64_t m = 0, heads = 0, kv_heads = 0, head_dim = 0, capacity = 0, pos0 = 0;
};

struct AttentionResult {
  std::vector<double> out;  // [M][H*D]
  double max_abs_v = 0;     // largest |v| over the rows any query reads: bounds |out| and its errors
  double max_score = 0;     // largest D^-0.5 * sum_d |q_d k_d|: bounds a score's fp32 rounding error
};

// q: fp16 bits [M][H*D]; caches: fp16 bits [C][KVH*D]. Rows past pos0 + M - 1 are never read.
AttentionResult reference_attention(const AttentionProblem& p, const std::vector<uint16_t>& q,
                                    const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache);

}  // namespace qt::kernels::attention
