#include "models/core/model_config.h"

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "models/core/config_limits.h"

namespace qt {

namespace {

[[noreturn]] void bad_field(const std::string& source, const char* field, const std::string& value,
                            const std::string& why) {
  fail_file(source, std::string("field ") + field + " = " + value + ": " + why);
}

void check_range(const std::string& source, const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    bad_field(source, field, std::to_string(value),
              "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
}

std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

}  // namespace

void validate_config(const ModelConfig& c, const std::string& source) {
  check_range(source, "dim", c.dim, 1, limits::kMaxDim);
  check_range(source, "hidden_dim", c.hidden_dim, 1, limits::kMaxHiddenDim);
  check_range(source, "n_layers", c.n_layers, 1, limits::kMaxLayers);
  check_range(source, "n_heads", c.n_heads, 1, limits::kMaxHeads);
  check_range(source, "n_kv_heads", c.n_kv_heads, 1, c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0) {
    bad_field(source, "n_kv_heads", std::to_string(c.n_kv_heads),
              "must divide n_heads = " + std::to_string(c.n_heads));
  }
  check_range(source, "vocab_size", c.vocab_size, 1, limits::kMaxVocab);
  check_range(source, "max_seq_len", c.max_seq_len, 1, limits::kMaxSeqLen);
  check_range(source, "head_dim", c.head_dim, 2, limits::kMaxHeadDim);
  if (c.head_dim % 2 != 0) bad_field(source, "head_dim", std::to_string(c.head_dim), "must be even (RoPE pairs)");
  if (c.q_dim() > limits::kMaxDim) {
    bad_field(source, "n_heads", std::to_string(c.n_heads),
              "n_heads * head_dim = " + std::to_string(c.q_dim()) + " exceeds " + std::to_string(limits::kMaxDim));
  }
  check_range(source, "group_size", c.group_size, 1, limits::kMaxGroupSize);
  if (!std::isfinite(c.rope_theta) || !(c.rope_theta > 0.0f)) {
    bad_field(source, "rope_theta", float_text(c.rope_theta), "must be a positive finite number");
  }
  if (!std::isfinite(c.rms_norm_eps) || !(c.rms_norm_eps > 0.0f) || !(c.rms_norm_eps < 1.0f)) {
    bad_field(source, "rms_norm_eps", float_text(c.rms_norm_eps), "must be in (0, 1)");
  }
  if (c.is_moe()) {
    check_range(source, "num_experts", c.num_experts, 1, limits::kMaxExperts);
    check_range(source, "num_experts_per_tok", c.num_experts_per_tok, 1, c.num_experts);
  } else {
    if (c.num_experts != 0) bad_field(source, "num_experts", std::to_string(c.num_experts), "must be 0 for a dense model");
    if (c.num_experts_per_tok != 0) {
      bad_field(source, "num_experts_per_tok", std::to_string(c.num_experts_per_tok), "must be 0 for a dense model");
    }
    if (c.norm_topk_prob) bad_field(source, "norm_topk_prob", "1", "must be 0 for a dense model");
  }
}

}  // namespace qt
