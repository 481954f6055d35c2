// Every CPU backend op against a plain double-precision reference written from the math in
// the Qwen3 modelling code of transformers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels_src/moe/moe_reference.h"
#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/cpu_backend.h"
#include "tests/runtime/random_model.h"

using namespace qt;
using namespace qt::rt;

namespace {

const WeightType kAllTypes[] = {WeightType::F32,         WeightType::F16,          WeightType::BF16,
                                WeightType::Q8_0,        WeightType::INT8_GW_SYM,  WeightType::INT8_GW_ASYM,
                                WeightType::AWQ_INT4};

quant::QuantizedTensor random_tensor(std::mt19937_64& rng, WeightType t, int64_t rows, int64_t cols, int32_t group) {
  const std::vector<float> v = test::random_values(rng, static_cast<size_t>(rows * cols), 0.5f);
  const bool q = t != WeightType::F32 && t != WeightType::F16 && t != WeightType::BF16;
  return quant::quantize_tensor(v.data(), rows, cols, t, q ? group : 0);
}

std::vector<float> plain_matmul(const QTensor& w, const std::vector<float>& x, int64_t m) {
  const std::vector<float> dq = dequantize(w);
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < w.rows; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += double(dq[n * w.cols + k]) * x[i * w.cols + k];
      y[i * w.rows + n] = float(acc);
    }
  return y;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

TEST_CASE("reference matmul equals dequantized weights times fp32 activations", "[runtime][ops]") {
  std::mt19937_64 rng(2);
  CpuBackend be(test::cpu_options(true, 2));
  for (WeightType t : kAllTypes) {
    INFO(weight_type_name(t));
    const auto w = random_tensor(rng, t, 40, 96, 32);
    const std::vector<float> x = test::random_values(rng, 3 * 96, 1.0f);
    std::vector<float> y(3 * 40);
    be.matmul(w.view(), x.data(), 3, y.data());
    const std::vector<float> expect = plain_matmul(w.view(), x, 3);
    for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(expect[i]).margin(1e-6));
  }
}

TEST_CASE("fast matmul of every ISA stays within int8-activation error and is row-independent", "[runtime][ops]") {
  std::mt19937_64 rng(3);
  const std::vector<Isa> isas = test::available_isas();
  for (int32_t group : {32, 64, 128}) {
    for (WeightType t : kAllTypes) {
      const auto w = random_tensor(rng, t, 72, 256, group);
      const int64_t m = 5;
      const std::vector<float> x = test::random_values(rng, static_cast<size_t>(m * 256), 1.0f);
      const std::vector<float> expect = plain_matmul(w.view(), x, m);
      for (Isa isa : isas) {
        INFO(weight_type_name(t) << " group " << group << " isa " << isa_name(isa));
        CpuBackend be(test::cpu_options(false, 2, isa));
        std::vector<float> y(static_cast<size_t>(m * 72)), y1(72);
        be.matmul(w.view(), x.data(), m, y.data());
        // int8 activations: each group's rounding error is at most half a step of amax/127.
        const bool float_type = t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16;
        const float tol = float_type ? 1e-4f : 0.02f * max_abs(expect);
        for (size_t i = 0; i < y.size(); ++i) REQUIRE(std::fabs(y[i] - expect[i]) <= tol);
        for (int64_t i = 0; i < m; ++i) {
          be.matmul(w.view(), x.data() + i * 256, 1, y1.data());
          REQUIRE(std::equal(y1.begin(), y1.end(), y.begin() + i * 72));
        }
        be.matmul(w.view(), x.data(), m, y.data(), MatmulMode::kExact);
        for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(expect[i]).margin(1e-4));
      }
    }
  }
}

TEST_CASE("rmsnorm matches weight * x / sqrt(mean(x^2) + eps), in place too", "[runtime][ops]") {
  std::mt19937_64 rng(4);
  CpuBackend be(test::cpu_options(false, 2));
  const int64_t rows = 5, n = 48;
  std::vector<float> x = test::random_values(rng, rows * n, 3.0f), w = test::random_values(rng, n, 1.0f), y(rows * n);
  be.rmsnorm(x.data(), w.data(), rows, n, 1e-6f, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) REQUIRE(y[r * n + i] == Approx(w[i] * x[r * n + i] * inv).margin(1e-5));
  }
  be.rmsnorm(x.data(), w.data(), rows, n, 1e-6f, x.data());
  CHECK(x == y);
}

TEST_CASE("rope rotates element i with i + head_dim/2 by pos * theta^(-2i/d)", "[runtime][ops]") {
  std::mt19937_64 rng(5);
  CpuBackend be(test::cpu_options(false, 1));
  const int64_t m = 3, heads = 2, hd = 16, pos0 = 7;
  const float theta = 10000.0f;
  std::vector<float> x = test::random_values(rng, m * heads * hd, 1.0f), orig = x;
  be.rope(x.data(), m, heads, hd, pos0, theta);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < hd; ++i) {
        const int64_t j = i % (hd / 2);
        const double angle = double(pos0 + r) * std::pow(double(theta), -2.0 * j / hd);
        const float* v = orig.data() + (r * heads + h) * hd;
        const double rotated = i < hd / 2 ? -v[i + hd / 2] : v[i - hd / 2];  // rotate_half
        const double expect = v[i] * std::cos(angle) + rotated * std::sin(angle);
        REQUIRE(x[(r * heads + h) * hd + i] == Approx(expect).margin(1e-5));
      }
}

TEST_CASE("attention is causal softmax(QK^T/sqrt(d))V with kv head h / group", "[runtime][ops]") {
  std::mt19937_64 rng(6);
  const int64_t heads = 4, kv = 2, hd = 8, pos0 = 5, m = 3, len = pos0 + m;
  const std::vector<float> q = test::random_values(rng, m * heads * hd, 1.0f);
  const std::vector<float> kc = test::random_values(rng, len * kv * hd, 1.0f), vc = test::random_values(rng, len * kv * hd, 1.0f);
  for (bool reference : {true, false}) {
    CpuBackend be(test::cpu_options(reference, 2));
    std::vector<float> out(m * heads * hd);
    be.attention(q.data(), kc.data(), vc.data(), pos0, m, heads, kv, hd, out.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t g = h / (heads / kv), visible = pos0 + i + 1;
        std::vector<double> s(visible);
        for (int64_t p = 0; p < visible; ++p) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += double(q[(i * heads + h) * hd + e]) * kc[(p * kv + g) * hd + e];
          s[p] = d / std::sqrt(double(hd));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int64_t e = 0; e < hd; ++e) {
          double o = 0;
          for (int64_t p = 0; p < visible; ++p) o += s[p] / sum * vc[(p * kv + g) * hd + e];
          REQUIRE(out[(i * heads + h) * hd + e] == Approx(o).margin(1e-5));
        }
      }
  }
}

TEST_CASE("silu_mul and add do what they say", "[runtime][ops]") {
  std::mt19937_64 rng(7);
  CpuBackend be(test::cpu_options(false, 1));
  std::vector<float> g = test::random_values(rng, 20, 4.0f), u = test::random_values(rng, 20, 2.0f), g0 = g;
  be.silu_mul(CpuBackend::host(g.data()), CpuBackend::host(u.data()), 20);
  for (int i = 0; i < 20; ++i) REQUIRE(g[i] == Approx(g0[i] / (1 + std::exp(-double(g0[i]))) * u[i]).margin(1e-6));
  std::vector<float> y = u;
  be.add(CpuBackend::host(y.data()), CpuBackend::host(g.data()), 20);
  for (int i = 0; i < 20; ++i) REQUIRE(y[i] == u[i] + g[i]);
}

TEST_CASE("every ISA's silu_mul is silu(g) * u to 1e-6, past exp's range too, and its bits do not depend on the split",
          "[runtime][ops]") {
  std::mt19937_64 rng(11);
  // Gates from -120 to 120 (exp(-g) past float's range at both ends), then ordinary ones; 53 is no multiple of 8.
  std::vector<float> g0 = test::random_values(rng, 53, 6.0f), u = test::random_values(rng, 53, 2.0f);
  const float extremes[] = {-120.0f, -88.5f, -87.0f, -20.0f, 0.0f, 20.0f, 88.5f, 120.0f};
  std::copy(std::begin(extremes), std::end(extremes), g0.begin());
  for (Isa isa : test::available_isas()) {
    INFO(isa_name(isa));
    const AttentionKernels& ak = attention_kernels_for(isa);
    std::vector<float> whole = g0, split = g0;
    ak.silu_mul(whole.data(), u.data(), int64_t(whole.size()));
    for (size_t i = 0; i < g0.size(); ++i) {
      INFO("gate " << g0[i]);
      const double want = double(g0[i]) / (1 + std::exp(-double(g0[i]))) * u[i];
      REQUIRE(std::isfinite(whole[i]));
      REQUIRE(whole[i] == Approx(want).epsilon(1e-6).margin(1e-30));
    }
    for (int64_t at : {3, 17, 40}) {
      std::copy(g0.begin(), g0.end(), split.begin());
      ak.silu_mul(split.data(), u.data(), at);
      ak.silu_mul(split.data() + at, u.data() + at, int64_t(split.size()) - at);
      REQUIRE(std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the reference path's silu_mul is libm's: g / (1 + std::exp(-g)) * u in float, bit for bit", "[runtime][ops]") {
  std::mt19937_64 rng(13);
  const int64_t n = 4096;  // enough values that a polynomial exp differs from libm's on some of them
  std::vector<float> g = test::random_values(rng, size_t(n), 8.0f), u = test::random_values(rng, size_t(n), 2.0f);
  std::vector<float> want(g.size());
  for (size_t i = 0; i < g.size(); ++i) want[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  CpuBackend be(test::cpu_options(true, 2));
  be.silu_mul(CpuBackend::host(g.data()), CpuBackend::host(u.data()), n);
  REQUIRE(std::memcmp(g.data(), want.data(), want.size() * sizeof(float)) == 0);
}

TEST_CASE("every ISA's sum of squares (rmsnorm's) is the in-order double sum to 1e-13, tails included, and the reference's is that sum",
          "[runtime][ops]") {
  std::mt19937_64 rng(17);
  const std::vector<float> x = test::random_values(rng, 1031, 3.0f);
  for (const int64_t n : {1, 7, 8, 15, 16, 17, 128, 1024, 1031}) {
    double want = 0.0;
    for (int64_t i = 0; i < n; ++i) want += double(x[size_t(i)]) * double(x[size_t(i)]);
    REQUIRE(kScalarAttention.sum_squares(x.data(), n) == want);  // bit for bit: the reference path's definition
    for (Isa isa : test::available_isas()) {
      INFO(isa_name(isa) << ", n " << n);
      // Reordering 1031 double adds moves the sum by up to about n * 2^-53 of it; a dropped element by its square.
      REQUIRE(std::fabs(attention_kernels_for(isa).sum_squares(x.data(), n) - want) <= 1e-13 * want);
    }
  }
}

TEST_CASE("router takes fp32 softmax over all experts, top-k, renormalizes only when asked", "[runtime][ops]") {
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  std::vector<int32_t> ex(3);
  std::vector<float> w(3);
  double total = 0;
  for (float l : logits) total += std::exp(double(l));
  kernels::moe::gating(logits.data(), 1, 6, 3, false, ex.data(), w.data());
  CHECK(ex == std::vector<int32_t>{1, 3, 4});  // the tie between experts 1 and 3 goes to the lower index
  CHECK(w[0] == Approx(std::exp(2.0) / total));
  CHECK(w[2] == Approx(std::exp(1.0) / total));
  kernels::moe::gating(logits.data(), 1, 6, 3, true, ex.data(), w.data());
  const double top = 2 * std::exp(2.0) + std::exp(1.0);
  CHECK(w[0] == Approx(std::exp(2.0) / top));
  CHECK(w[0] + w[1] + w[2] == Approx(1.0));
}

TEST_CASE("a fused matmul group equals separate matmuls of the same input", "[runtime][ops]") {
  std::mt19937_64 rng(11);
  for (WeightType t : kAllTypes) {
    INFO(weight_type_name(t));
    const auto a = random_tensor(rng, t, 48, 128, 32), b = random_tensor(rng, t, 16, 128, 32),
               c = random_tensor(rng, t, 16, 128, 32);
    const QTensor va = a.view(), vb = b.view(), vc = c.view();
    for (int64_t m : {1, 6}) {
      const std::vector<float> x = test::random_values(rng, static_cast<size_t>(m * 128), 1.0f);
      CpuBackend be(test::cpu_options(false, 2));
      std::vector<float> ya(static_cast<size_t>(m * 48)), yb(static_cast<size_t>(m * 16)), yc(static_cast<size_t>(m * 16));
      const MatmulJob jobs[3] = {{&va, CpuBackend::host(ya.data())}, {&vb, CpuBackend::host(yb.data())}, {&vc, CpuBackend::host(yc.data())}};
      be.matmul_group(jobs, 3, CpuBackend::host(x.data()), m);
      std::vector<float> sa(ya.size()), sb(yb.size()), sc(yc.size());
      be.matmul(va, x.data(), m, sa.data());
      be.matmul(vb, x.data(), m, sb.data());
      be.matmul(vc, x.data(), m, sc.data());
      CHECK(ya == sa);
      CHECK(yb == sb);
      CHECK(yc == sc);
    }
  }
}
