#include "tests/runtime/random_model.h"

#include <cmath>
#include <cstring>
#include <string>

namespace qt::test {

std::vector<float> random_values(std::mt19937_64& rng, size_t n, float a) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

ModelConfig small_config(bool moe, int32_t n_layers) {
  ModelConfig c;
  c.arch = moe ? ModelArch::Qwen3Moe : ModelArch::Qwen3Dense;
  c.dim = 64;
  c.hidden_dim = moe ? 64 : 128;
  c.n_layers = n_layers;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 32;
  c.vocab_size = 256;
  c.max_seq_len = 512;
  c.rope_theta = 10000.0f;
  c.rms_norm_eps = 1e-6f;
  if (moe) {
    c.num_experts = 8;
    c.num_experts_per_tok = 3;
    c.norm_topk_prob = true;
  }
  return c;
}

namespace {

// One [E][N][K] block per array, as moe3 stores experts, from separately quantized experts.
ExpertStack stacked(const std::vector<QTensor>& experts, RandomModel& m) {
  ExpertStack s;
  s.base = experts.at(0);
  s.experts = int64_t(experts.size());
  const auto specs = weight_traits(s.base.type).array_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t bytes = s.base.array_bytes(specs[i]);
    auto& block = m.stacks.emplace_back(bytes * experts.size());
    for (size_t e = 0; e < experts.size(); ++e)
      std::memcpy(block.data() + bytes * e, experts[e].array(specs[i].array), bytes);
    s.base.set_array(specs[i].array, block.data());
    s.stride[i] = bytes;
  }
  return s;
}

}  // namespace

std::unique_ptr<RandomModel> make_random_model(const RandomModelSpec& spec) {
  auto m = std::make_unique<RandomModel>();
  const ModelConfig& c = spec.config;
  m->weights.config = c;
  std::mt19937_64 rng(spec.seed);
  auto tensor = [&](int64_t rows, int64_t cols, WeightType type, float scale) {
    const std::vector<float> v = random_values(rng, static_cast<size_t>(rows * cols), scale / std::sqrt(float(cols)));
    const bool quantized = type != WeightType::F32 && type != WeightType::F16 && type != WeightType::BF16;
    m->storage.push_back(std::make_unique<quant::QuantizedTensor>(
        quant::quantize_tensor(v.data(), rows, cols, type, quantized ? spec.group_size : 0)));
    return m->storage.back()->view();
  };
  auto norm = [&](int64_t n) {
    std::vector<float> v = random_values(rng, static_cast<size_t>(n), 0.2f);
    for (float& x : v) x += 1.0f;
    return v;
  };
  m->weights.embedding = tensor(c.vocab_size, c.dim, spec.embed_type, 8.0f);
  m->weights.classifier = c.shared_classifier ? m->weights.embedding : tensor(c.vocab_size, c.dim, spec.embed_type, 4.0f);
  m->weights.final_norm = norm(c.dim);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = norm(c.dim);
    lw.ffn_norm = norm(c.dim);
    lw.q_norm = norm(c.head_dim);
    lw.k_norm = norm(c.head_dim);
    lw.wq = tensor(c.q_dim(), c.dim, spec.linear_type, 1.7f);
    lw.wk = tensor(c.kv_dim(), c.dim, spec.linear_type, 1.7f);
    lw.wv = tensor(c.kv_dim(), c.dim, spec.linear_type, 1.7f);
    lw.wo = tensor(c.dim, c.q_dim(), spec.linear_type, 1.7f);
    if (c.is_moe()) {
      lw.router = tensor(c.num_experts, c.dim, WeightType::F32, 3.0f);
      std::vector<QTensor> w1, w2, w3;
      for (int32_t e = 0; e < c.num_experts; ++e) {
        w1.push_back(tensor(c.hidden_dim, c.dim, spec.expert_type, 1.7f));
        w2.push_back(tensor(c.dim, c.hidden_dim, spec.expert_type, 1.7f));
        w3.push_back(tensor(c.hidden_dim, c.dim, spec.expert_type, 1.7f));
      }
      lw.expert_w1 = stacked(w1, *m), lw.expert_w2 = stacked(w2, *m), lw.expert_w3 = stacked(w3, *m);
    } else {
      lw.w1 = tensor(c.hidden_dim, c.dim, spec.linear_type, 1.7f);
      lw.w2 = tensor(c.dim, c.hidden_dim, spec.linear_type, 1.7f);
      lw.w3 = tensor(c.hidden_dim, c.dim, spec.linear_type, 1.7f);
    }
    m->weights.layers.push_back(std::move(lw));
  }
  return m;
}

}  // namespace qt::test
