#include "runtime/cli/decode_trial.h"

#include <cstdio>

#include "common/error.h"
#include "common/quantile.h"

namespace qt::rt {
namespace {

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  return buf;
}

}  // namespace

DecodeTrial::DecodeTrial(std::vector<DecodeVariant> candidates, Apply apply, int untimed_steps, int timed_steps)
    : apply_(std::move(apply)), untimed_(untimed_steps), timed_(timed_steps) {
  if (candidates.size() < 2) throw Error("a decode trial needs two variants or more", kExitFailure);
  if (untimed_steps < 0 || timed_steps < 1) throw Error("a decode trial times one step of each variant or more", kExitFailure);
  for (DecodeVariant& v : candidates) candidates_.push_back({std::move(v), {}, ""});
  current_ = start_from(0);
  if (current_ == candidates_.size()) throw Error("no decode variant of the trial runs here: " + line(), kExitFailure);
}

size_t DecodeTrial::start_from(size_t from) {
  for (size_t i = from; i < candidates_.size(); ++i) {
    candidates_[i].refused = apply_(candidates_[i].variant);
    if (candidates_[i].refused.empty()) {
      steps_in_candidate_ = 0;
      return i;
    }
  }
  return candidates_.size();
}

void DecodeTrial::step_done(double seconds) {
  if (done_) return;
  ++steps_;
  Candidate& c = candidates_[current_];
  if (++steps_in_candidate_ > untimed_) c.times.push_back(seconds);
  if (int(c.times.size()) < timed_) return;
  const size_t next = start_from(current_ + 1);
  if (next < candidates_.size()) {
    current_ = next;
    return;
  }
  finish(current_ + 1 < candidates_.size());
}

// The smallest median wins; a tie keeps the earlier candidate (plain comes first).
void DecodeTrial::finish(bool reapply) {
  done_ = true;
  size_t best = candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (candidates_[i].times.empty()) continue;
    if (best == candidates_.size() || median(candidates_[i].times) < median(candidates_[best].times)) best = i;
  }
  // The last candidate timed is the one running; the winner ran a moment ago, so it applies again.
  if (best != current_ || reapply) {
    const std::string why = apply_(candidates_[best].variant);
    if (!why.empty()) {  // it ran during the trial: a refusal now is the backend's fault
      throw Error("decode trial: " + candidates_[best].variant.label() + " no longer runs: " + why, kExitFailure);
    }
    current_ = best;
  }
}

std::string DecodeTrial::line() const {
  std::string timed, refused;
  size_t timed_count = 0;
  for (const Candidate& c : candidates_) {
    if (!c.refused.empty()) refused += "; " + c.variant.label() + " not run (" + c.refused + ")";
    if (c.times.empty()) continue;
    ++timed_count;
    timed += std::string(timed.empty() ? "" : ", ") + c.variant.label() + " " + ms(median(c.times));
  }
  if (done_)
    return "decode step: " + running().label() + ", timed fastest of " + std::to_string(timed_count) +
           " on this run's first " + std::to_string(steps_) + " decode steps (median a step: " + timed + ")" + refused;
  return "decode step: " + running().label() + " (the trial of the decode variants stopped after " +
         std::to_string(steps_) + " decode steps, before it could compare them" + (timed.empty() ? "" : ": " + timed) +
         ")" + refused;
}

std::vector<DecodeVariant> trial_candidates(bool pdl, bool fusable) {
  std::vector<DecodeVariant> out{make_variant(false, false)};
  if (fusable || pdl) out.push_back(make_variant(fusable, pdl));
  return out;
}

}  // namespace qt::rt
