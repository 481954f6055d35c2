#pragma once
// A plain-text table for qtune static's outputs: columns padded to their widest cell, two spaces apart, the
// last column unpadded.
#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

namespace qt::tune {

struct TextTable {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  void print(std::ostream& os) const {
    std::vector<size_t> w(head.size());
    for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
    for (const auto& r : rows)
      for (size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    auto line = [&](const std::vector<std::string>& r) {
      std::string s;
      for (size_t i = 0; i < r.size(); ++i) {
        if (i) s += "  ";
        s += r[i];
        if (i + 1 < r.size() && r[i].size() < w[i]) s += std::string(w[i] - r[i].size(), ' ');
      }
      os << s << "\n";
    };
    line(head);
    for (const auto& r : rows) line(r);
  }
};

}  // namespace qt::tune
