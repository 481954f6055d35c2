// The Qwen3 forward pass: against an independent naive implementation of the math, and the equivalences
// that make the KV cache and the MoE grouping correct.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/error.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/model/qwen3_model.h"
#include "tests/runtime/random_model.h"

using namespace qt;
using namespace qt::rt;

namespace {

using Vec = std::vector<double>;

Vec matvec(const QTensor& w, const Vec& x) {
  const std::vector<float> d = dequantize(w);
  Vec y(static_cast<size_t>(w.rows), 0.0);
  for (int64_t n = 0; n < w.rows; ++n)
    for (int64_t k = 0; k < w.cols; ++k) y[n] += double(d[n * w.cols + k]) * x[k];
  return y;
}

Vec rmsnorm(const Vec& x, const std::vector<float>& w, double eps, size_t off = 0, size_t n = 0) {
  if (n == 0) n = x.size();
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + eps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = w[i] * x[off + i] * inv;
  return y;
}

// Token-at-a-time forward written straight from modeling_qwen3(_moe).py in double precision.
std::vector<Vec> naive_forward(const ModelWeights& mw, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = mw.config;
  const int64_t hd = c.head_dim, T = int64_t(tokens.size());
  std::vector<std::vector<Vec>> K(static_cast<size_t>(c.n_layers)), V(static_cast<size_t>(c.n_layers));
  std::vector<Vec> logits;
  const std::vector<float> emb = dequantize(mw.embedding);
  for (int64_t t = 0; t < T; ++t) {
    Vec x(emb.begin() + tokens[t] * c.dim, emb.begin() + (tokens[t] + 1) * c.dim);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const LayerWeights& lw = mw.layers[l];
      const Vec h = rmsnorm(x, lw.attn_norm, c.rms_norm_eps);
      Vec q = matvec(lw.wq, h), k = matvec(lw.wk, h), v = matvec(lw.wv, h);
      auto norm_rope = [&](Vec& a, int64_t heads, const std::vector<float>& nw) {
        for (int64_t hh = 0; hh < heads; ++hh) {
          Vec r = rmsnorm(a, nw, c.rms_norm_eps, static_cast<size_t>(hh * hd), static_cast<size_t>(hd));
          for (int64_t i = 0; i < hd / 2; ++i) {
            const double ang = double(t) * std::pow(double(c.rope_theta), -2.0 * i / hd);
            a[hh * hd + i] = r[i] * std::cos(ang) - r[i + hd / 2] * std::sin(ang);
            a[hh * hd + i + hd / 2] = r[i + hd / 2] * std::cos(ang) + r[i] * std::sin(ang);
          }
        }
      };
      norm_rope(q, c.n_heads, lw.q_norm);
      norm_rope(k, c.n_kv_heads, lw.k_norm);
      K[l].push_back(k);
      V[l].push_back(v);
      Vec att(static_cast<size_t>(c.q_dim()), 0.0);
      for (int64_t hh = 0; hh < c.n_heads; ++hh) {
        const int64_t g = hh / (c.n_heads / c.n_kv_heads);
        Vec s(static_cast<size_t>(t + 1));
        for (int64_t p = 0; p <= t; ++p) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += q[hh * hd + e] * K[l][p][g * hd + e];
          s[p] = d / std::sqrt(double(hd));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t p = 0; p <= t; ++p)
          for (int64_t e = 0; e < hd; ++e) att[hh * hd + e] += s[p] / sum * V[l][p][g * hd + e];
      }
      const Vec o = matvec(lw.wo, att);
      for (int64_t i = 0; i < c.dim; ++i) x[i] += o[i];
      const Vec h2 = rmsnorm(x, lw.ffn_norm, c.rms_norm_eps);
      auto mlp = [&](const QTensor& w1, const QTensor& w2, const QTensor& w3) {
        Vec a = matvec(w1, h2);
        const Vec b = matvec(w3, h2);
        for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
        return matvec(w2, a);
      };
      if (c.is_moe()) {
        Vec r = matvec(lw.router, h2);
        const double mx = *std::max_element(r.begin(), r.end());
        double sum = 0;
        for (double& e : r) sum += (e = std::exp(e - mx));
        for (double& e : r) e /= sum;
        std::vector<int> order(r.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r[a] > r[b]; });
        order.resize(static_cast<size_t>(c.num_experts_per_tok));
        double top = 0;
        for (int e : order) top += r[e];
        std::sort(order.begin(), order.end());
        for (int e : order) {
          const Vec y = mlp(lw.expert_w1.expert(e), lw.expert_w2.expert(e), lw.expert_w3.expert(e));
          const double wgt = c.norm_topk_prob ? r[e] / top : r[e];
          for (int64_t i = 0; i < c.dim; ++i) x[i] += wgt * y[i];
        }
      } else {
        const Vec y = mlp(lw.w1, lw.w2, lw.w3);
        for (int64_t i = 0; i < c.dim; ++i) x[i] += y[i];
      }
    }
    logits.push_back(matvec(mw.classifier, rmsnorm(x, mw.final_norm, c.rms_norm_eps)));
  }
  return logits;
}

std::vector<int32_t> prompt(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + 11) % vocab;
  return t;
}

test::RandomModelSpec spec(bool moe, WeightType type, bool norm_topk = true, bool tied = false) {
  test::RandomModelSpec s;
  s.config = test::small_config(moe);
  s.config.norm_topk_prob = moe && norm_topk;
  s.config.shared_classifier = tied;
  s.linear_type = type;
  s.expert_type = type;
  return s;
}

}  // namespace

TEST_CASE("reference forward matches a naive double-precision Qwen3 (dense, tied, MoE both norms, AWQ, INT8)",
          "[runtime][model]") {
  struct Case {
    const char* name;
    test::RandomModelSpec s;
  };
  const Case cases[] = {
      {"dense f32", spec(false, WeightType::F32)},
      {"dense tied q8_0", spec(false, WeightType::Q8_0, true, true)},
      {"moe norm_topk q8_0", spec(true, WeightType::Q8_0, true)},
      {"moe no norm_topk int8 asym", spec(true, WeightType::INT8_GW_ASYM, false)},
      {"dense awq", spec(false, WeightType::AWQ_INT4)},
  };
  for (const Case& cs : cases) {
    INFO(cs.name);
    auto m = test::make_random_model(cs.s);
    CpuBackend be(test::cpu_options(true, 2));
    Qwen3Model model(m->weights, be, 64);
    const auto tokens = prompt(9, cs.s.config.vocab_size);
    const std::vector<float> got = model.forward(tokens, LogitsRows::kAll);
    const std::vector<Vec> expect = naive_forward(m->weights, tokens);
    const int64_t vocab = cs.s.config.vocab_size;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int64_t v = 0; v < vocab; ++v) REQUIRE(got[t * vocab + v] == Approx(expect[t][v]).margin(1e-4));
  }
}

TEST_CASE("decoding with the KV cache gives the logits of a full prefill", "[runtime][model]") {
  for (bool moe : {false, true}) {
    for (bool reference : {true, false}) {
      INFO((moe ? "moe" : "dense") << (reference ? " reference" : " fast"));
      auto m = test::make_random_model(spec(moe, WeightType::Q8_0));
      CpuBackend be(test::cpu_options(reference, 2));
      const int64_t vocab = m->weights.config.vocab_size;
      const auto tokens = prompt(12, int(vocab));
      Qwen3Model full(m->weights, be, 32);
      const std::vector<float> all = full.forward(tokens, LogitsRows::kAll);
      Qwen3Model inc(m->weights, be, 32);
      inc.forward(tokens.data(), 5, LogitsRows::kNone);  // a prefill, then one token at a time
      for (size_t t = 5; t < tokens.size(); ++t) {
        const std::vector<float> step = inc.forward(&tokens[t], 1, LogitsRows::kLast);
        for (int64_t v = 0; v < vocab; ++v) REQUIRE(step[v] == Approx(all[t * vocab + v]).margin(1e-4));
      }
      CHECK(inc.position() == int64_t(tokens.size()));
    }
  }
}

TEST_CASE("greedy decoding of a model whose logits are all NaN is an error, never token 0", "[runtime][model]") {
  for (bool reference : {true, false}) {
    INFO((reference ? "reference" : "fast"));
    auto m = test::make_random_model(spec(false, WeightType::Q8_0));
    for (float& w : m->weights.final_norm) w = std::nanf("");  // every logit NaN, as from corrupt weights
    CpuBackend be(test::cpu_options(reference, 2));
    Qwen3Model model(m->weights, be, 16);
    const auto tokens = prompt(3, int(m->weights.config.vocab_size));
    CHECK_THROWS_WITH(model.forward_greedy(tokens.data(), int64_t(tokens.size())), Catch::Contains("all NaN"));
    // The argmax itself: NaN never wins, and a row of NaN gives -1 (no token).
    std::vector<float> rows = {std::nanf(""), 2.0f, std::nanf(""), std::nanf(""), std::nanf(""), std::nanf("")};
    int32_t out[2] = {7, 7};
    be.argmax(Act{reinterpret_cast<uint64_t>(rows.data()), ActType::F32}, 2, 3, out);
    CHECK(out[0] == 1);
    CHECK(out[1] == -1);
  }
}

TEST_CASE("MoE prefill grouped by expert equals running tokens one by one, and chunking changes nothing",
          "[runtime][model]") {
  for (WeightType t : {WeightType::Q8_0, WeightType::INT8_GW_SYM, WeightType::AWQ_INT4}) {
    INFO(weight_type_name(t));
    auto m = test::make_random_model(spec(true, t));
    CpuBackend be(test::cpu_options(false, 2));
    const int64_t vocab = m->weights.config.vocab_size;
    const auto tokens = prompt(10, int(vocab));
    Qwen3Model grouped(m->weights, be, 32);
    const std::vector<float> all = grouped.forward(tokens, LogitsRows::kAll);
    Qwen3Model single(m->weights, be, 32, /*max_batch=*/1);
    const std::vector<float> one = single.forward(tokens, LogitsRows::kAll);
    Qwen3Model chunked(m->weights, be, 32, /*max_batch=*/4);
    const std::vector<float> chunks = chunked.forward(tokens, LogitsRows::kAll);
    for (size_t i = 0; i < all.size(); ++i) {
      REQUIRE(one[i] == Approx(all[i]).margin(1e-4));
      REQUIRE(chunks[i] == Approx(all[i]).margin(1e-4));
    }
  }
}

TEST_CASE("the fast path agrees with the reference path on the top token", "[runtime][model]") {
  for (WeightType t : {WeightType::Q8_0, WeightType::INT8_GW_ASYM, WeightType::AWQ_INT4}) {
    INFO(weight_type_name(t));
    auto m = test::make_random_model(spec(true, t));
    CpuBackend ref(test::cpu_options(true, 2)), fast(test::cpu_options(false, 2));
    const int64_t vocab = m->weights.config.vocab_size;
    const auto tokens = prompt(16, int(vocab));
    Qwen3Model a(m->weights, ref, 32), b(m->weights, fast, 32);
    const std::vector<float> la = a.forward(tokens, LogitsRows::kAll), lb = b.forward(tokens, LogitsRows::kAll);
    int same = 0;
    float worst = 0, scale = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto ra = la.begin() + i * vocab, rb = lb.begin() + i * vocab;
      same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
      for (int64_t v = 0; v < vocab; ++v) {
        worst = std::max(worst, std::fabs(ra[v] - rb[v]));
        scale = std::max(scale, std::fabs(ra[v]));
      }
    }
    INFO("worst logit difference " << worst << " of logits up to " << scale);
    CHECK(same >= 15);
    // int8 activations cost about 1% of the logit range on this random model (documented tolerance).
    CHECK(worst < 0.03f * scale);
  }
}

TEST_CASE("inputs that do not fit are errors, not crashes", "[runtime][model]") {
  auto m = test::make_random_model(spec(false, WeightType::F32));
  CpuBackend be(test::cpu_options(false, 1));
  Qwen3Model model(m->weights, be, 8);
  const auto tokens = prompt(9, 256);
  CHECK_THROWS_AS(model.forward(tokens), Error);
  const std::vector<int32_t> bad{1, 256};
  CHECK_THROWS_AS(model.forward(bad), Error);
  CHECK(model.position() == 0);
  CHECK_THROWS_AS(Qwen3Model(m->weights, be, 100000), Error);
}
