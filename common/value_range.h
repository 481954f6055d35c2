#pragma once
// The values a number may take, stated once per meaning (common/flag_ranges.h, models/core/config_limits.h)
// and used wherever that number is checked: a command-line flag when it is parsed, a sampler setting, a
// model header field.
#include <cstdint>
#include <string>

namespace qt {

struct IntRange {
  int64_t lo, hi;
};

// For seeds: every 64-bit value is one, and the upper half does not fit IntRange.
struct UintRange {
  uint64_t lo, hi;
};

struct RealRange {
  double lo, hi;
  bool lo_open = false, hi_open = false;  // (lo, ...] excludes lo itself
};

bool contains(const IntRange& r, int64_t v);
bool contains(const UintRange& r, uint64_t v);
bool contains(const RealRange& r, double v);  // false for NaN and infinities

// "1..1024", "(0, 1]": as an error message and --help show the range.
std::string range_text(const IntRange& r);
std::string range_text(const UintRange& r);
std::string range_text(const RealRange& r);

}  // namespace qt
