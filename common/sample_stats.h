#pragma once
// A summary of repeated timings: median with MAD, p20/p80, a distribution-free confidence interval of the
// median, and the raw samples. The tuner's measurements and the results store share it.
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qt {

struct Stats {
  int n = 0;
  double median = 0, mad = 0, p20 = 0, p80 = 0, mean = 0, min = 0, max = 0;
  double ci_low = 0, ci_high = 0;  // ~95% CI of the median from order statistics
  std::vector<double> samples;     // raw, in measurement order
};

Stats summarize(const std::vector<double>& samples);
nlohmann::json stats_to_json(const Stats& s, bool with_samples = true);
Stats stats_from_json(const nlohmann::json& j);

}  // namespace qt
