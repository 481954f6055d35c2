#include "common/sample_stats.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "common/quantile.h"

namespace qt {

Stats summarize(const std::vector<double>& samples) {
  Stats st;
  st.samples = samples;
  st.n = int(samples.size());
  if (samples.empty()) return st;
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  st.median = sorted_quantile(s, 0.5);
  st.p20 = sorted_quantile(s, 0.2);
  st.p80 = sorted_quantile(s, 0.8);
  st.min = s.front();
  st.max = s.back();
  double sum = 0;
  for (double x : s) sum += x;
  st.mean = sum / double(s.size());
  std::vector<double> dev;
  for (double x : s) dev.push_back(std::fabs(x - st.median));
  std::sort(dev.begin(), dev.end());
  st.mad = sorted_quantile(dev, 0.5);
  // 95% distribution-free interval for the median from order statistics (normal approximation to the
  // binomial): 1-based ranks round(n/2 - 1.96 sqrt(n)/2) and round(1 + n/2 + 1.96 sqrt(n)/2). The "+1" on
  // the upper rank matters: without it the interval is one rank too narrow on each side and racing drops
  // candidates on less than 95% confidence. With few samples it widens to [min, max], so racing then needs
  // even the fastest sample to lose.
  double n = double(s.size());
  double half = 1.96 * std::sqrt(n) / 2.0;
  long lo_rank = std::max(1L, std::lround(n / 2.0 - half));
  long hi_rank = std::min(long(n), std::lround(1.0 + n / 2.0 + half));
  st.ci_low = s[size_t(lo_rank - 1)];
  st.ci_high = s[size_t(std::max(lo_rank, hi_rank) - 1)];
  return st;
}

nlohmann::json stats_to_json(const Stats& s, bool with_samples) {
  nlohmann::json j = {{"n", s.n},         {"median", s.median}, {"mad", s.mad},   {"p20", s.p20},
                      {"p80", s.p80},     {"mean", s.mean},     {"min", s.min},   {"max", s.max},
                      {"ci_low", s.ci_low}, {"ci_high", s.ci_high}};
  if (with_samples) j["samples"] = s.samples;
  return j;
}

Stats stats_from_json(const nlohmann::json& j) {
  if (j.contains("samples") && j["samples"].is_array() && !j["samples"].empty())
    return summarize(j["samples"].get<std::vector<double>>());
  Stats s;
  s.n = j.value("n", 0);
  s.median = j.value("median", 0.0);
  s.mad = j.value("mad", 0.0);
  s.p20 = j.value("p20", 0.0);
  s.p80 = j.value("p80", 0.0);
  s.mean = j.value("mean", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  s.ci_low = j.value("ci_low", 0.0);
  s.ci_high = j.value("ci_high", 0.0);
  return s;
}

}  // namespace qt
