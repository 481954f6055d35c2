#pragma once
// config.json of a Qwen3 / Qwen3-MoE checkpoint -> ModelConfig, and the reverse for synthetic checkpoints.
//
// Accepted: architectures Qwen3ForCausalLM / Qwen3MoeForCausalLM (or model_type qwen3 / qwen3_moe). Shape
// fields are required; the rest take transformers' class defaults when absent (num_key_value_heads =
// num_attention_heads, head_dim = hidden_size / num_attention_heads, max_position_embeddings 32768,
// tie_word_embeddings false, rope_theta 10000, rms_norm_eps 1e-6; MoE: num_experts_per_tok 8,
// norm_topk_prob false, decoder_sparse_step 1, mlp_only_layers []). Rejected with a message: other
// architectures, attention biases, sliding-window attention, RoPE scaling, MoE configs where some layer is a
// dense MLP, and any quantization_config other than AutoAWQ 4-bit GEMM with zero points.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/core/model_config.h"

namespace qt::hf {

struct HfModelConfig {
  ModelConfig config;              // group_size left 0: it belongs to the output format
  bool tie_word_embeddings = false;
  std::optional<int32_t> awq_group_size;  // set for AutoAWQ checkpoints
  std::string torch_dtype;                // informational ("bfloat16", ...), may be empty
  // Special ids as config.json states them (qwen3.c's tokenizer export takes them from here); -1 if absent.
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
};

HfModelConfig parse_hf_config(const nlohmann::json& j, const std::string& source);
HfModelConfig load_hf_config(const std::string& path);  // reads and parses config.json

// config.json for a synthetic checkpoint of `c` (torch_dtype and, if awq_group_size, an AutoAWQ
// quantization_config).
nlohmann::json make_hf_config(const ModelConfig& c, const std::string& torch_dtype,
                              std::optional<int32_t> awq_group_size);

}  // namespace qt::hf
