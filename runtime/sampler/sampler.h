#pragma once
// Token sampling with the transformers logits-processor semantics, in this order:
//   repetition penalty -> (temperature 0: greedy argmax) -> temperature -> top-k -> top-p -> min-p -> draw.
//   * repetition penalty p (CTRL / transformers RepetitionPenaltyLogitsProcessor): for every distinct token
//     in the history window, logit < 0 ? logit * p : logit / p. 1 disables it.
//   * top-k: keep tokens whose logit is >= the k-th largest (ties at the boundary are kept). 0 disables.
//   * top-p: keep the most probable tokens until their cumulative probability reaches p; the token that
//     crosses p is kept (a token is dropped iff the tokens ranked above it already hold >= p). 1 disables.
//   * min-p: drop tokens whose probability is below min_p times the most probable one's. 0 disables.
// At least one token always survives. The draw uses a seeded xorshift64* generator, so a seed fixes the
// whole sequence of choices.
#include <cfloat>
#include <cstdint>
#include <vector>

#include "common/value_range.h"

namespace qt::rt {

// What each setting accepts (qrun's flags take the same).
inline constexpr RealRange kTemperatureRange{0, FLT_MAX};
inline constexpr IntRange kTopKRange{0, INT32_MAX};
inline constexpr RealRange kTopPRange{0, 1, true};
inline constexpr RealRange kMinPRange{0, 1};
inline constexpr RealRange kRepetitionPenaltyRange{0, FLT_MAX, true};
inline constexpr IntRange kRepeatLastNRange{0, INT32_MAX};

struct SamplerConfig {
  float temperature = 1.0f;   // 0 = greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t repeat_last_n = 0;  // history window for the penalty; 0 = the whole history
  uint64_t seed = 0;
};

// Throws qt::Error naming the field if a value is out of range (negative temperature, top_p outside (0,1], ...).
void validate_sampler_config(const SamplerConfig& c);

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  double uniform();  // [0, 1)

 private:
  uint64_t state_;
};

struct Candidate {
  int32_t token;
  double prob;
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);
  const SamplerConfig& config() const { return config_; }
  // Whether the choice is the argmax of the raw logits (temperature 0, no repetition penalty), which a device
  // can make without the logits leaving it.
  bool greedy() const { return config_.temperature == 0.0f && config_.repetition_penalty == 1.0f; }

  // The tokens that survive the filters with their renormalized probabilities, most probable first (ties:
  // lower id first). With temperature 0 this is the argmax alone with probability 1.
  std::vector<Candidate> distribution(const float* logits, int64_t vocab, const std::vector<int32_t>& history) const;
  int32_t sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history);

 private:
  SamplerConfig config_;
  Rng rng_;
};

}  // namespace qt::rt
