#include "runtime/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <unordered_set>

#include "common/error.h"

namespace qt::rt {

void validate_sampler_config(const SamplerConfig& c) {
  auto real = [](const char* what, float v, const RealRange& r) {
    if (!contains(r, v)) throw Error(std::string(what) + " must be in " + range_text(r) + ", got " + std::to_string(v));
  };
  auto integer = [](const char* what, int64_t v, const IntRange& r) {
    if (!contains(r, v)) throw Error(std::string(what) + " must be in " + range_text(r) + ", got " + std::to_string(v));
  };
  real("temperature", c.temperature, kTemperatureRange);
  integer("top-k", c.top_k, kTopKRange);
  real("top-p", c.top_p, kTopPRange);
  real("min-p", c.min_p, kMinPRange);
  real("repetition penalty", c.repetition_penalty, kRepetitionPenaltyRange);
  integer("repeat-last-n", c.repeat_last_n, kRepeatLastNRange);
}

Rng::Rng(uint64_t seed) {
  // splitmix64 spreads any seed (0 included) into a non-zero xorshift state.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  state_ = (z ^ (z >> 31)) | 1ull;
}

uint64_t Rng::next_u64() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1Dull;
}

double Rng::uniform() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

Sampler::Sampler(const SamplerConfig& config) : config_(config), rng_(config.seed) {
  validate_sampler_config(config_);
}

std::vector<Candidate> Sampler::distribution(const float* logits, int64_t vocab,
                                             const std::vector<int32_t>& history) const {
  // Only the penalized tokens are copied; everything else reads the logits in place, so a vocabulary of
  // 150k costs one or two linear passes per token.
  const float* base = logits;
  std::vector<float> penalized;
  // A model whose weights overflow or are corrupt gives logits that are not numbers: NaN never wins (as in
  // greedy decoding, it is never sampled), and a row without a number or with an infinity has no distribution.
  int64_t nans = 0;
  for (int64_t t = 0; t < vocab; ++t) {
    if (std::isnan(logits[t])) ++nans;
    else if (logits[t] == INFINITY)
      throw Error("the model's logits overflow to infinity (token id " + std::to_string(t) +
                  "): its weights overflow or are corrupt, so there is no distribution to sample", kExitBadInput);
  }
  if (nans == vocab)
    throw Error("the model's logits are all NaN: its weights overflow or are corrupt, so there is no next token",
                kExitBadInput);
  if (nans > 0) {
    penalized.assign(logits, logits + vocab);
    for (float& v : penalized)
      if (std::isnan(v)) v = -INFINITY;
    base = penalized.data();
  }
  if (config_.repetition_penalty != 1.0f) {
    if (penalized.empty()) penalized.assign(logits, logits + vocab);
    const size_t from = config_.repeat_last_n > 0 && history.size() > size_t(config_.repeat_last_n)
                            ? history.size() - size_t(config_.repeat_last_n)
                            : 0;
    std::unordered_set<int32_t> seen(history.begin() + ptrdiff_t(from), history.end());
    const float p = config_.repetition_penalty;
    for (int32_t t : seen) {
      if (t >= 0 && t < vocab) penalized[size_t(t)] = penalized[size_t(t)] < 0 ? penalized[size_t(t)] * p : penalized[size_t(t)] / p;
    }
    base = penalized.data();
  }
  auto better = [&](int32_t a, int32_t b) { return base[a] > base[b] || (base[a] == base[b] && a < b); };
  if (config_.temperature == 0.0f) {
    int32_t best = 0;
    for (int32_t t = 1; t < vocab; ++t)
      if (base[t] > base[best]) best = t;
    return {Candidate{best, 1.0}};
  }

  std::vector<int32_t> order;
  if (config_.top_k > 0 && int64_t(config_.top_k) < vocab) {
    // A min-heap of the k best so far gives the k-th largest logit; every token at least that large survives.
    std::vector<float> heap;
    heap.reserve(size_t(config_.top_k) + 1);
    for (int64_t t = 0; t < vocab; ++t) {
      if (heap.size() < size_t(config_.top_k)) {
        heap.push_back(base[t]);
        std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      } else if (base[t] > heap.front()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
        heap.back() = base[t];
        std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      }
    }
    const float kth = heap.front();
    for (int32_t t = 0; t < vocab; ++t)
      if (base[t] >= kth) order.push_back(t);
  } else {
    order.resize(size_t(vocab));
    std::iota(order.begin(), order.end(), 0);
  }
  std::sort(order.begin(), order.end(), better);
  auto scaled = [&](int32_t t) { return double(base[t]) / double(config_.temperature); };

  auto probs_of = [&](const std::vector<int32_t>& toks) {
    std::vector<double> p(toks.size());
    const double mx = scaled(toks[0]);
    double sum = 0.0;
    for (size_t i = 0; i < toks.size(); ++i) sum += (p[i] = std::exp(scaled(toks[i]) - mx));
    for (double& v : p) v /= sum;
    return p;
  };
  std::vector<double> prob = probs_of(order);
  if (config_.top_p < 1.0f) {
    double above = 0.0;
    size_t n = 0;
    while (n < order.size() && (n == 0 || above < double(config_.top_p))) above += prob[n++];
    order.resize(n);
    prob = probs_of(order);
  }
  if (config_.min_p > 0.0f) {
    const double cut = double(config_.min_p) * prob[0];
    size_t n = 1;
    while (n < order.size() && prob[n] >= cut) ++n;
    order.resize(n);
    prob = probs_of(order);
  }
  std::vector<Candidate> out(order.size());
  for (size_t i = 0; i < order.size(); ++i) out[i] = Candidate{order[i], prob[i]};
  return out;
}

int32_t Sampler::sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history) {
  const std::vector<Candidate> cands = distribution(logits, vocab, history);
  if (cands.size() == 1) return cands[0].token;
  const double u = rng_.uniform();
  double cum = 0.0;
  for (const Candidate& c : cands) {
    cum += c.prob;
    if (u < cum) return c.token;
  }
  return cands.back().token;
}

}  // namespace qt::rt
