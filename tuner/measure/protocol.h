#pragma once
// The measurement protocol: untimed warm-up runs, then timed repetitions in batches until both a minimum
// count and a minimum time are reached (or a maximum count/time), each repetition optionally preceded by
// an untimed cache flush. Reported: median with MAD, p20/p80, and a distribution-free confidence interval
// of the median. Racing: once a batch is in, a candidate whose median CI lies entirely above the
// incumbent's (lower bound > incumbent's upper bound) is clearly slower and its timing stops.
#include <cstddef>
#include <functional>
#include <vector>

#include "common/sample_stats.h"

namespace qt::tune {

using qt::Stats;  // common/sample_stats.h
using qt::stats_from_json;
using qt::stats_to_json;
using qt::summarize;

struct MeasureOptions {
  int warmup = 2;
  int min_reps = 5;
  int max_reps = 200;
  double min_seconds = 0.02;  // total timed time before stopping (with min_reps)
  double max_seconds = 1.0;   // give up adding repetitions after this much timed time
  int batch = 5;              // repetitions between racing decisions
  bool racing = true;
};

struct Measurement {
  Stats stats;
  bool raced_out = false;
};

// `run_once` executes the candidate once and returns its duration in seconds as the device measures it.
// `flush` (may be empty) runs untimed before every timed repetition. `incumbent` (may be null) enables racing.
Measurement measure(const std::function<double()>& run_once, const std::function<void()>& flush,
                    const MeasureOptions& opt, const Stats* incumbent);

// Racing decision on its own, for callers that gather samples themselves.
bool clearly_slower(const Stats& candidate, const Stats& incumbent);

}  // namespace qt::tune
