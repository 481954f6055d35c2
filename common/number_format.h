#pragma once
// One number through a printf format into a string, for tables and reports ("%.1f", "%.0f%%", "%.3g").
#include <cstdio>
#include <string>

namespace qt {

inline std::string format_number(const char* printf_format, double v) {
  char b[400];  // wide enough for any double in any format: no figure is ever cut short
  std::snprintf(b, sizeof b, printf_format, v);
  return b;
}

}  // namespace qt
