#pragma once
// What attention_decode and attention_prefill share: the dims {M, H, KVH, D, C, P} (query tokens, query heads,
// KV heads, head dim, cache capacity in tokens, the pos0 the tests put in "pos"), the buffers, the shape
// checks, the test inputs and the expected output with its tolerance.
#include <string>
#include <vector>

#include "kernels_src/attention/attention_reference.h"
#include "kernels_src/registry/family.h"

namespace qt::kernels::attention {

extern const std::vector<std::string> kDims;

AttentionProblem problem(const Shape& s);

// "" or why no kernel of either family can run the shape (sizes, GQA ratio, D % 8, P + M <= C).
std::string shape_check(const AttentionProblem& p);

// q, k_cache, v_cache (fp16), pos (i32) as Inputs and out (fp16) as the Output.
std::vector<BufferSpec> attention_buffers(const AttentionProblem& p);

// q and the first P + M cache rows random; rows past them are NaN, so a kernel reading beyond the causal
// range poisons its output.
HostBuffers make_attention_inputs(const Shape& shape, uint64_t seed);

// The reference output "out". `p_in_fp16`: the kernel rounds the softmax weights to fp16 before P V.
Expected expected_attention(const Shape& shape, const HostBuffers& in, bool p_in_fp16);

// Shapes a model needs: decode (M = 1) at two context lengths, or prefill (M = 512 from position 0, and a
// 64-token follow-up turn after 1024 cached tokens), at the model's cache capacity.
std::vector<Shape> decode_model_shapes(const ModelConfig& c);
std::vector<Shape> prefill_model_shapes(const ModelConfig& c);

}  // namespace qt::kernels::attention
