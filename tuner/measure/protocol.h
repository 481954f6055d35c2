#pragma once
// The measurement protocol: untimed warm-up runs, then timed repetitions in batches until both a minimum
// count and a minimum time are reached (or a maximum count/time), each repetition optionally preceded by
// an untimed cache flush. Reported: median with MAD, p20/p80, and a distribution-free confidence interval
// of the median. Racing: once a batch is in, a candidate whose median CI lies entirely above the
// incumbent's (lower bound > incumbent's upper bound) is clearly slower and its timing stops.
#include <cstddef>
#include <functional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qt::tune {

struct MeasureOptions {
  int warmup = 2;
  int min_reps = 5;
  int max_reps = 200;
  double min_seconds = 0.02;  // total timed time before stopping (with min_reps)
  double max_seconds = 1.0;   // give up adding repetitions after this much timed time
  int batch = 5;              // repetitions between racing decisions
  bool racing = true;
};

struct Stats {
  int n = 0;
  double median = 0, mad = 0, p20 = 0, p80 = 0, mean = 0, min = 0, max = 0;
  double ci_low = 0, ci_high = 0;  // ~95% CI of the median from order statistics
  std::vector<double> samples;     // raw, in measurement order
};

Stats summarize(const std::vector<double>& samples);
nlohmann::json stats_to_json(const Stats& s, bool with_samples = true);
Stats stats_from_json(const nlohmann::json& j);

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
