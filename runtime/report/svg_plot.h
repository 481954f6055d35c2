#pragma once
// Plain SVG charts for reports, readable in any browser and on GitHub: a line chart of several series over
// one x axis (log2 or linear x, log10 or linear y), and grouped bars. No script, no external fonts.
#include <string>
#include <utility>
#include <vector>

#include "runtime/report/text_escape.h"  // xml_escape: every label is escaped

namespace qt::report {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); points with y <= 0 on a log axis are left out
};

struct LinePlot {
  std::string title, x_label, y_label;
  bool log2_x = true, log10_y = true;
  std::vector<Series> series;
};

// Bars grouped by category: values[s][c] is series s in category c (<= 0: no bar).
struct BarPlot {
  std::string title, y_label;
  std::vector<std::string> categories;
  std::vector<std::string> series;
  std::vector<std::vector<double>> values;
};

std::string render_line_plot(const LinePlot& plot);
std::string render_bar_plot(const BarPlot& plot);

}  // namespace qt::report
