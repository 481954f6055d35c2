#include "common/quantile.h"

#include <algorithm>
#include <cmath>

namespace qt {

double sorted_quantile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * double(sorted.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

double quantile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return sorted_quantile(samples, q);
}

double median(std::vector<double> samples) { return quantile(std::move(samples), 0.5); }

}  // namespace qt
