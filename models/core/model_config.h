#pragma once
// The architecture hyper-parameters every part of qtune agrees on, whatever file they came from.
#include <cstdint>
#include <string>

namespace qt {

enum class ModelArch { Qwen3Dense, Qwen3Moe };

// The most rows the lm_head (and the argmax over its logits) runs on at once: a prompt's logits go through it in
// passes of this many rows, which bounds the logits buffer; decode and sampling use one row per sequence.
inline constexpr int64_t kLogitRowsPerPass = 16;

struct ModelConfig {
  ModelArch arch = ModelArch::Qwen3Dense;
  int32_t dim = 0;          // hidden_size
  int32_t hidden_dim = 0;   // dense: intermediate_size; MoE: moe_intermediate_size (each expert's width)
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;   // rows of the embedding (config.vocab_size, 151936 for Qwen3)
  int32_t max_seq_len = 0;  // max_position_embeddings
  int32_t head_dim = 0;     // may differ from dim / n_heads
  bool shared_classifier = false;  // lm_head tied to embed_tokens
  int32_t group_size = 0;   // quantization group of the file's main weight type (Q8_0: qwen3.c rule; AWQ: G)
  float rope_theta = 1e6f;
  float rms_norm_eps = 1e-6f;
  // Qwen3-MoE only (zero for dense).
  int32_t num_experts = 0;
  int32_t num_experts_per_tok = 0;
  bool norm_topk_prob = false;

  int64_t q_dim() const { return int64_t(n_heads) * head_dim; }
  int64_t kv_dim() const { return int64_t(n_kv_heads) * head_dim; }
  bool is_moe() const { return arch == ModelArch::Qwen3Moe; }
};

// Throws qt::Error naming `source` and the offending field if the hyper-parameters are inconsistent
// (non-positive sizes, n_heads % n_kv_heads != 0, odd head_dim, experts_per_tok > num_experts, ...).
void validate_config(const ModelConfig& c, const std::string& source);

}  // namespace qt
