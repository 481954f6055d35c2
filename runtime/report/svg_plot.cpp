#include "runtime/report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace qt::report {
namespace {

constexpr double kWidth = 720, kHeight = 420, kLeft = 80, kRight = 190, kTop = 40, kBottom = 60;
// Colour-blind-safe palette (Okabe-Ito), in series order.
const char* const kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"};

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A tick label: 3 significant digits, or an exponent for very large/small values.
std::string tick_text(double v) {
  char b[32];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3))
    std::snprintf(b, sizeof b, "%.0e", v);
  else
    std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double map(double v, double from, double to) const {
    const double a = log ? std::log(lo) : lo, b = log ? std::log(hi) : hi;
    const double t = ((log ? std::log(v) : v) - a) / (b - a);
    return from + t * (to - from);
  }
  std::vector<double> ticks(bool base2) const {
    std::vector<double> t;
    if (log) {
      const double base = base2 ? 2.0 : 10.0;
      for (double v = std::pow(base, std::floor(std::log(lo) / std::log(base))); v <= hi * 1.0001; v *= base)
        if (v >= lo * 0.9999) t.push_back(v);
      if (t.size() > 12) {  // thin a long log2 axis to every other power
        std::vector<double> thin;
        for (size_t i = 0; i < t.size(); i += 2) thin.push_back(t[i]);
        t = thin;
      }
    } else {
      const double step = std::pow(10.0, std::floor(std::log10((hi - lo) / 4)));
      for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
    }
    return t;
  }
};

Axis fit(std::vector<double> values, bool log) {
  Axis a;
  a.log = log;
  values.erase(std::remove_if(values.begin(), values.end(),
                              [&](double v) { return !std::isfinite(v) || (log && v <= 0); }),
               values.end());
  if (values.empty()) values = {1.0};
  a.lo = *std::min_element(values.begin(), values.end());
  a.hi = *std::max_element(values.begin(), values.end());
  if (log) {
    a.lo /= 1.25, a.hi *= 1.25;
  } else {
    a.lo = std::min(0.0, a.lo);
    a.hi = a.hi > a.lo ? a.hi * 1.1 : a.lo + 1;
  }
  if (a.hi <= a.lo) a.hi = a.lo * 2 + 1;
  return a;
}

std::string header(const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
         "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
         "<text x=\"" + num(kWidth / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" + xml_escape(title) +
         "</text>\n";
}

std::string frame(const std::string& x_label, const std::string& y_label) {
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  return "<rect x=\"" + num(x0) + "\" y=\"" + num(y1) + "\" width=\"" + num(x1 - x0) + "\" height=\"" +
         num(y0 - y1) + "\" fill=\"none\" stroke=\"#444\"/>\n<text x=\"" + num((x0 + x1) / 2) + "\" y=\"" +
         num(kHeight - 18) + "\" text-anchor=\"middle\">" + xml_escape(x_label) + "</text>\n<text x=\"18\" y=\"" +
         num((y0 + y1) / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + num((y0 + y1) / 2) + ")\">" +
         xml_escape(y_label) + "</text>\n";
}

std::string y_ticks(const Axis& y) {
  std::string s;
  const double x0 = kLeft, x1 = kWidth - kRight;
  for (double v : y.ticks(false)) {
    const double py = y.map(v, kHeight - kBottom, kTop);
    s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(py) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(py) +
         "\" stroke=\"#ddd\"/>\n<text x=\"" + num(x0 - 6) + "\" y=\"" + num(py + 4) + "\" text-anchor=\"end\">" +
         tick_text(v) + "</text>\n";
  }
  return s;
}

std::string legend(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    const double y = kTop + 10 + 20 * double(i), x = kWidth - kRight + 14;
    s += "<rect x=\"" + num(x) + "\" y=\"" + num(y - 9) + "\" width=\"12\" height=\"12\" fill=\"" +
         kColours[i % std::size(kColours)] + "\"/>\n<text x=\"" + num(x + 18) + "\" y=\"" + num(y + 1) + "\">" +
         xml_escape(names[i]) + "</text>\n";
  }
  return s;
}

}  // namespace

std::string render_line_plot(const LinePlot& p) {
  std::vector<double> xs, ys;
  for (const Series& s : p.series)
    for (const auto& [x, y] : s.points) xs.push_back(x), ys.push_back(y);
  const Axis x = fit(xs, p.log2_x), y = fit(ys, p.log10_y);
  std::string svg = header(p.title) + y_ticks(y);
  for (double v : x.ticks(true)) {
    const double px = x.map(v, kLeft, kWidth - kRight);
    svg += "<text x=\"" + num(px) + "\" y=\"" + num(kHeight - kBottom + 16) + "\" text-anchor=\"middle\">" +
           tick_text(v) + "</text>\n";
  }
  svg += frame(p.x_label, p.y_label);
  std::vector<std::string> names;
  for (size_t i = 0; i < p.series.size(); ++i) {
    const Series& s = p.series[i];
    names.push_back(s.name);
    const char* colour = kColours[i % std::size(kColours)];
    std::string path;
    for (const auto& [px, py] : s.points) {
      if (!std::isfinite(py) || (p.log10_y && py <= 0) || (p.log2_x && px <= 0)) continue;
      const double sx = x.map(px, kLeft, kWidth - kRight), sy = y.map(py, kHeight - kBottom, kTop);
      path += (path.empty() ? "M" : " L") + num(sx) + " " + num(sy);
      svg += "<circle cx=\"" + num(sx) + "\" cy=\"" + num(sy) + "\" r=\"3\" fill=\"" + colour + "\"/>\n";
    }
    if (!path.empty())
      svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\"/>\n";
  }
  return svg + legend(names) + "</svg>\n";
}

std::string render_bar_plot(const BarPlot& p) {
  std::vector<double> all;
  for (const auto& row : p.values)
    for (double v : row) all.push_back(v);
  all.push_back(0);
  const Axis y = fit(all, false);
  std::string svg = header(p.title) + y_ticks(y) + frame("", p.y_label);
  const double x0 = kLeft, x1 = kWidth - kRight;
  const size_t nc = std::max<size_t>(1, p.categories.size()), ns = std::max<size_t>(1, p.series.size());
  const double group = (x1 - x0) / double(nc), bar = group * 0.8 / double(ns);
  for (size_t c = 0; c < p.categories.size(); ++c) {
    const double gx = x0 + group * double(c) + group * 0.1;
    svg += "<text x=\"" + num(gx + group * 0.4) + "\" y=\"" + num(kHeight - kBottom + 16) +
           "\" text-anchor=\"middle\">" + xml_escape(p.categories[c]) + "</text>\n";
    for (size_t s = 0; s < p.series.size(); ++s) {
      const double v = s < p.values.size() && c < p.values[s].size() ? p.values[s][c] : 0;
      if (!(v > 0) || !std::isfinite(v)) continue;
      const double top = y.map(v, kHeight - kBottom, kTop), base = y.map(0, kHeight - kBottom, kTop);
      svg += "<rect x=\"" + num(gx + bar * double(s)) + "\" y=\"" + num(top) + "\" width=\"" + num(bar * 0.9) +
             "\" height=\"" + num(base - top) + "\" fill=\"" + kColours[s % std::size(kColours)] + "\"><title>" +
             xml_escape(p.series[s] + " " + p.categories[c] + ": " + tick_text(v)) + "</title></rect>\n";
    }
  }
  return svg + legend(p.series) + "</svg>\n";
}

}  // namespace qt::report
