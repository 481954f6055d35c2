#include "common/value_range.h"

#include <cmath>
#include <cstdio>

namespace qt {

bool contains(const IntRange& r, int64_t v) { return v >= r.lo && v <= r.hi; }
bool contains(const UintRange& r, uint64_t v) { return v >= r.lo && v <= r.hi; }

bool contains(const RealRange& r, double v) {
  if (!std::isfinite(v)) return false;
  return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

std::string range_text(const IntRange& r) { return std::to_string(r.lo) + ".." + std::to_string(r.hi); }
std::string range_text(const UintRange& r) { return std::to_string(r.lo) + ".." + std::to_string(r.hi); }

std::string range_text(const RealRange& r) {
  char b[96];
  std::snprintf(b, sizeof b, "%c%g, %g%c", r.lo_open ? '(' : '[', r.lo, r.hi, r.hi_open ? ')' : ']');
  return b;
}

}  // namespace qt
