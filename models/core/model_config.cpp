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

void check_range(const std::string& source, const char* field, int64_t value, IntRange r) {
  if (!contains(r, value))
    bad_field(source, field, std::to_string(value), "must be in [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]");
}

std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

}  // namespace

void validate_config(const ModelConfig& c, const std::string& source) {
  check_range(source, "dim", c.dim, limits::kDimRange);
  check_range(source, "hidden_dim", c.hidden_dim, limits::kHiddenDimRange);
  check_range(source, "n_layers", c.n_layers, limits::kLayersRange);
  check_range(source, "n_heads", c.n_heads, limits::kHeadsRange);
  check_range(source, "n_kv_heads", c.n_kv_heads, IntRange{1, c.n_heads});
  if (c.n_heads % c.n_kv_heads != 0) {
    bad_field(source, "n_kv_heads", std::to_string(c.n_kv_heads),
              "must divide n_heads = " + std::to_string(c.n_heads));
  }
  check_range(source, "vocab_size", c.vocab_size, limits::kVocabRange);
  check_range(source, "max_seq_len", c.max_seq_len, limits::kSeqLenRange);
  check_range(source, "head_dim", c.head_dim, limits::kHeadDimRange);
  if (c.head_dim % 2 != 0) bad_field(source, "head_dim", std::to_string(c.head_dim), "must be even (RoPE pairs)");
  if (c.q_dim() > limits::kMaxDim) {
    bad_field(source, "n_heads", std::to_string(c.n_heads),
              "n_heads * head_dim = " + std::to_string(c.q_dim()) + " exceeds " + std::to_string(limits::kMaxDim));
  }
  check_range(source, "group_size", c.group_size, limits::kGroupSizeRange);
  if (!contains(limits::kRopeThetaRange, c.rope_theta))
    bad_field(source, "rope_theta", float_text(c.rope_theta), "must be in " + range_text(limits::kRopeThetaRange) + " (RoPE frequencies theta^(-2i/d) stay at most 1)");
  if (!contains(limits::kRmsEpsRange, c.rms_norm_eps))
    bad_field(source, "rms_norm_eps", float_text(c.rms_norm_eps), "must be in " + range_text(limits::kRmsEpsRange));
  if (c.is_moe()) {
    check_range(source, "num_experts", c.num_experts, limits::kExpertsRange);
    check_range(source, "num_experts_per_tok", c.num_experts_per_tok, IntRange{1, c.num_experts});
  } else {
    if (c.num_experts != 0) bad_field(source, "num_experts", std::to_string(c.num_experts), "must be 0 for a dense model");
    if (c.num_experts_per_tok != 0) {
      bad_field(source, "num_experts_per_tok", std::to_string(c.num_experts_per_tok), "must be 0 for a dense model");
    }
    if (c.norm_topk_prob) bad_field(source, "norm_topk_prob", "1", "must be 0 for a dense model");
  }
}

}  // namespace qt
