#include "models/synthetic/presets.h"

#include "common/error.h"

namespace qt::synthetic {

namespace {

struct Preset {
  const char* name;
  ModelArch arch;
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab, max_seq;
  bool tied;
  int32_t experts, experts_per_tok;
  bool norm_topk;
};

// Real shapes from the official config.json files. `default` keeps the
// real vocabulary so the Qwen3 tokenizer works, with a tiny body so it runs fast on a CPU.
constexpr Preset kPresets[] = {
    {"default", ModelArch::Qwen3Dense, 128, 384, 4, 4, 2, 32, 151936, 4096, true, 0, 0, false},
    {"tiny", ModelArch::Qwen3Dense, 64, 192, 2, 4, 2, 16, 512, 256, true, 0, 0, false},
    {"tiny-untied", ModelArch::Qwen3Dense, 64, 128, 2, 4, 2, 32, 512, 256, false, 0, 0, false},
    {"tiny-moe", ModelArch::Qwen3Moe, 64, 64, 2, 4, 2, 16, 512, 256, false, 8, 2, true},
    {"qwen3-0.6b", ModelArch::Qwen3Dense, 1024, 3072, 28, 16, 8, 128, 151936, 40960, true, 0, 0, false},
    {"qwen3-1.7b", ModelArch::Qwen3Dense, 2048, 6144, 28, 16, 8, 128, 151936, 40960, true, 0, 0, false},
    {"qwen3-4b", ModelArch::Qwen3Dense, 2560, 9728, 36, 32, 8, 128, 151936, 40960, true, 0, 0, false},
    {"qwen3-8b", ModelArch::Qwen3Dense, 4096, 12288, 36, 32, 8, 128, 151936, 40960, false, 0, 0, false},
    {"qwen3-30b-a3b", ModelArch::Qwen3Moe, 2048, 768, 48, 32, 4, 128, 151936, 40960, false, 128, 8, true},
};

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

ModelConfig preset_config(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig c;
    c.arch = p.arch;
    c.dim = p.dim;
    c.hidden_dim = p.hidden_dim;
    c.n_layers = p.n_layers;
    c.n_heads = p.n_heads;
    c.n_kv_heads = p.n_kv_heads;
    c.head_dim = p.head_dim;
    c.vocab_size = p.vocab;
    c.max_seq_len = p.max_seq;
    c.shared_classifier = p.tied;
    c.num_experts = p.experts;
    c.num_experts_per_tok = p.experts_per_tok;
    c.norm_topk_prob = p.norm_topk;
    c.rope_theta = 1e6f;
    c.rms_norm_eps = 1e-6f;
    return c;
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown preset '" + name + "' (known: " + known + ")");
}

}  // namespace qt::synthetic
