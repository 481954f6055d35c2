#pragma once
// The decode step's variant measured on the run itself. Which variant of a decode step is fastest (plain, the
// norms fused into the GEMVs beside them, programmatic dependent launch) depends on the GPU's launch costs and
// the model, which the static model cannot tell apart reliably: on the H200 of 29 Nov, fused norms + PDL was
// the fastest of four on both the 8B and the 30B-A3B shape (1.08x and 1.30x plain, results/gpu-h200-2026-11-29),
// the fused norms alone the slowest on the 8B. `qbench --choose-decode` ranks the variants once and stores the
// ranking; without a stored ranking, qrun on a GPU times its first decode steps instead: each candidate runs a
// few untimed steps (the first launches every kernel, the second captures the graph the rest replay), then a
// few timed ones, and the run goes on with the candidate of the smallest median step. Every variant computes
// the same step to within rounding (a fused norm sums a row's squares in its own order), so the switch changes
// the speed and at most the last bits of the logits; a run that must repeat bit for bit names its variant
// (qrun --decode, as the statistics line gives it).
#include <functional>
#include <string>
#include <vector>

#include "runtime/cli/decode_choice.h"

namespace qt::rt {

class DecodeTrial {
 public:
  // Switches the backend to a variant between two steps: "" when it did, else why it cannot run here (the
  // trial then leaves that candidate out).
  using Apply = std::function<std::string(const DecodeVariant&)>;
  static constexpr int kUntimedSteps = 2, kTimedSteps = 6;

  // Applies the first candidate that runs. Throws qt::Error when fewer than two candidates are given: one
  // variant needs no trial.
  DecodeTrial(std::vector<DecodeVariant> candidates, Apply apply, int untimed_steps = kUntimedSteps,
              int timed_steps = kTimedSteps);

  // After each decode step, its host time (the step queued, run and its token or logits back). Past the trial
  // it does nothing.
  void step_done(double seconds);
  bool done() const { return done_; }
  const DecodeVariant& running() const { return candidates_[current_].variant; }
  // For qrun's statistics: the variant the run settled on and the medians it was chosen by, or how far an
  // unfinished trial got.
  std::string line() const;

 private:
  struct Candidate {
    DecodeVariant variant;
    std::vector<double> times;
    std::string refused;  // why it could not run ("" if it ran)
  };
  // The next candidate from `from` on that applies, or candidates_.size() when none is left.
  size_t start_from(size_t from);
  // `reapply`: a candidate was refused after the running one, and its try may have changed the device's state.
  void finish(bool reapply);

  std::vector<Candidate> candidates_;
  Apply apply_;
  int untimed_, timed_;
  size_t current_ = 0;
  int steps_in_candidate_ = 0;
  int64_t steps_ = 0;
  bool done_ = false;
};

// The candidates qrun tries where nothing chose its decode variant: plain, and the most fused variant the run
// can use: fused norms where the weights allow them (`fusable`), with PDL where the device grants it (`pdl`: a
// CUDA GPU of sm_90 or later whose driver takes it). Plain alone when there is nothing to choose between.
std::vector<DecodeVariant> trial_candidates(bool pdl, bool fusable);

}  // namespace qt::rt
