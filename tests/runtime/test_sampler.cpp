// The sampler on fixed logit vectors: exact survivor sets of each filter, frequencies against the expected
// probabilities (chi-square), and seed reproducibility.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "common/error.h"
#include "runtime/sampler/sampler.h"

using namespace qt;
using namespace qt::rt;

namespace {

std::set<int32_t> survivors(const SamplerConfig& c, const std::vector<float>& logits,
                            const std::vector<int32_t>& history = {}) {
  std::set<int32_t> s;
  for (const Candidate& cand : Sampler(c).distribution(logits.data(), int64_t(logits.size()), history)) s.insert(cand.token);
  return s;
}

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

SamplerConfig plain() {
  SamplerConfig c;
  c.temperature = 1.0f;
  return c;
}

// Chi-square statistic of `draws` samples against `expect` (token -> probability).
double chi_square(Sampler& s, const std::vector<float>& logits, const std::map<int32_t, double>& expect, int draws) {
  std::map<int32_t, int> count;
  for (int i = 0; i < draws; ++i) {
    const int32_t t = s.sample(logits.data(), int64_t(logits.size()), {});
    REQUIRE(expect.count(t) == 1);  // never a token outside the expected support
    ++count[t];
  }
  double chi = 0;
  for (const auto& [t, p] : expect) {
    const double e = p * draws;
    chi += (count[t] - e) * (count[t] - e) / e;
  }
  return chi;
}

}  // namespace

TEST_CASE("top-k keeps the k largest logits and ties at the boundary", "[runtime][sampler]") {
  SamplerConfig c = plain();
  c.top_k = 3;
  CHECK(survivors(c, {1, 5, 3, 5, 2, 4}) == std::set<int32_t>{1, 3, 5});
  c.top_k = 2;
  CHECK(survivors(c, {5, 4, 4, 1}) == std::set<int32_t>{0, 1, 2});
  c.top_k = 10;
  CHECK(survivors(c, {5, 4, 4, 1}).size() == 4);
}

TEST_CASE("top-p keeps tokens until the mass above them reaches p", "[runtime][sampler]") {
  const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplerConfig c = plain();
  c.top_p = 0.75f;
  CHECK(survivors(c, l) == std::set<int32_t>{0, 1});
  c.top_p = 0.85f;
  CHECK(survivors(c, l) == std::set<int32_t>{0, 1, 2});
  c.top_p = 0.3f;
  CHECK(survivors(c, l) == std::set<int32_t>{0});
}

TEST_CASE("min-p drops tokens below min_p times the top probability", "[runtime][sampler]") {
  const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplerConfig c = plain();
  c.min_p = 0.25f;
  CHECK(survivors(c, l) == std::set<int32_t>{0, 1, 2});
  c.min_p = 0.5f;
  CHECK(survivors(c, l) == std::set<int32_t>{0, 1});
}

TEST_CASE("temperature 0 is greedy and repetition penalty rescales seen tokens", "[runtime][sampler]") {
  SamplerConfig c;
  c.temperature = 0.0f;
  const std::vector<float> l{2.0f, -1.0f, 1.9f, 2.0f};
  Sampler greedy(c);
  CHECK(greedy.sample(l.data(), 4, {}) == 0);  // tie -> lower id
  c.repetition_penalty = 2.0f;
  Sampler penal(c);
  CHECK(penal.sample(l.data(), 4, {0, 3, 1}) == 2);  // 2 -> 1, 2 -> 1, 1.9 untouched
  const auto d = penal.distribution(l.data(), 4, {1});
  CHECK(d.size() == 1);
  c.temperature = 1.0f;
  Sampler soft(c);
  const auto probs = soft.distribution(l.data(), 4, {0, 1});
  double p_minus = 0, sum = std::exp(1.0) + std::exp(-2.0) + std::exp(1.9) + std::exp(2.0);
  for (const auto& cand : probs)
    if (cand.token == 1) p_minus = cand.prob;
  CHECK(p_minus == Approx(std::exp(-2.0) / sum));  // negative logit multiplied by the penalty
}

TEST_CASE("sampled frequencies follow the filtered, tempered distribution (chi-square)", "[runtime][sampler]") {
  const std::vector<float> l{1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
  SamplerConfig c;
  c.temperature = 0.7f;
  c.top_k = 4;  // drops tokens 3 and 5
  c.seed = 1234;
  std::map<int32_t, double> expect;
  double sum = 0;
  for (int32_t t : {0, 1, 2, 4}) sum += std::exp(l[t] / 0.7);
  for (int32_t t : {0, 1, 2, 4}) expect[t] = std::exp(l[t] / 0.7) / sum;
  Sampler s(c);
  // df = 3: P(chi2 > 21.1) < 1e-4 for a correct sampler.
  CHECK(chi_square(s, l, expect, 40000) < 21.1);

  SamplerConfig u;
  u.temperature = 1.0f;
  u.seed = 99;
  std::map<int32_t, double> all;
  sum = 0;
  for (float v : l) sum += std::exp(double(v));
  for (int32_t t = 0; t < 6; ++t) all[t] = std::exp(double(l[t])) / sum;
  Sampler su(u);
  CHECK(chi_square(su, l, all, 40000) < 25.7);  // df = 5
}

TEST_CASE("a seed fixes the sequence of samples", "[runtime][sampler]") {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = float(std::sin(i * 0.7));
  SamplerConfig c;
  c.temperature = 1.0f;
  c.seed = 42;
  Sampler a(c), b(c);
  c.seed = 43;
  Sampler other(c);
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t x = a.sample(l.data(), 50, {}), y = b.sample(l.data(), 50, {});
    REQUIRE(x == y);
    differ += x != other.sample(l.data(), 50, {});
  }
  CHECK(differ > 100);
}

TEST_CASE("out-of-range sampler settings are rejected", "[runtime][sampler]") {
  SamplerConfig c;
  c.temperature = -1.0f;
  CHECK_THROWS_AS(Sampler(c), Error);
  c = SamplerConfig{};
  c.top_p = 0.0f;
  CHECK_THROWS_AS(Sampler(c), Error);
  c = SamplerConfig{};
  c.min_p = 1.5f;
  CHECK_THROWS_AS(Sampler(c), Error);
  c = SamplerConfig{};
  c.top_k = -2;
  CHECK_THROWS_AS(Sampler(c), Error);
}

TEST_CASE("logits that are not numbers: NaN is never sampled, a row of NaN or an infinity is an error naming why",
          "[runtime][sampler]") {
  const float nan = std::nanf("");
  // NaN tokens drop out; the others keep their probabilities among themselves.
  const std::vector<float> some = {nan, 0.0f, nan, std::log(3.0f)};
  const std::vector<Candidate> d = Sampler(plain()).distribution(some.data(), 4, {});
  REQUIRE(d.size() == 4);
  for (const Candidate& c : d) {
    if (c.token == 0 || c.token == 2) CHECK(c.prob == 0.0);
    if (c.token == 1) CHECK(c.prob == Approx(0.25));
    if (c.token == 3) CHECK(c.prob == Approx(0.75));
  }
  SamplerConfig penalized = plain();
  penalized.repetition_penalty = 1.5f;
  Sampler ps(penalized);
  for (int i = 0; i < 50; ++i) {
    const int32_t t = ps.sample(some.data(), 4, {1});
    CHECK((t == 1 || t == 3));
  }
  const std::vector<float> none(8, nan);
  CHECK_THROWS_WITH(Sampler(plain()).sample(none.data(), 8, {}), Catch::Contains("all NaN"));
  const std::vector<float> overflow = {0.0f, INFINITY, 1.0f};
  CHECK_THROWS_WITH(Sampler(plain()).sample(overflow.data(), 3, {}), Catch::Contains("overflow to infinity (token id 1)"));
}
