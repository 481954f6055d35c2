#pragma once
// Quantiles by linear interpolation between order statistics (position q * (n - 1) in the sorted
// samples), the one definition the tuner's timing summaries and search-efficiency sweeps share so their
// medians agree.
#include <span>
#include <vector>

namespace qt {

// `sorted` must be in ascending order; 0 when it is empty.
double sorted_quantile(std::span<const double> sorted, double q);

// Any order; 0 when empty.
double quantile(std::vector<double> samples, double q);
double median(std::vector<double> samples);

}  // namespace qt
