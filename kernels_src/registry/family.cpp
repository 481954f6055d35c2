#include "kernels_src/registry/family.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/half.h"

namespace qt::kernels {

std::string point_key(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

std::string shape_key(const ProblemShape& s) {
  return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
         " G=" + std::to_string(s.group);
}

int dtype_size(DType t) { return t == DType::F16 ? 2 : 4; }

const BufferSpec& LaunchPlan::buffer(const std::string& name) const {
  for (const auto& b : buffers)
    if (b.name == name) return b;
  throw Error("launch plan has no buffer '" + name + "'", kExitFailure);
}

Point KernelFamily::default_point() const {
  Point p;
  for (const auto& prm : params) p[prm.name] = prm.default_value;
  return p;
}

std::vector<Point> KernelFamily::default_points() const {
  return defaults.empty() ? std::vector<Point>{default_point()} : defaults;
}

std::vector<Point> enumerate_points(const KernelFamily& f) {
  std::vector<Point> out;
  Point p;
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == f.params.size()) {
      if (!f.point_constraint || f.point_constraint(p).empty()) out.push_back(p);
      return;
    }
    for (int64_t v : f.params[i].values) {
      p[f.params[i].name] = v;
      rec(i + 1);
    }
  };
  rec(0);
  return out;
}

void validate_point(const KernelFamily& f, const Point& p) {
  for (const auto& [k, v] : p) {
    const Param* prm = nullptr;
    for (const auto& q : f.params)
      if (q.name == k) prm = &q;
    if (!prm) throw Error("family " + f.name + " has no parameter '" + k + "'");
    bool ok = false;
    for (int64_t x : prm->values) ok = ok || x == v;
    if (!ok) throw Error("family " + f.name + ": " + k + "=" + std::to_string(v) + " is not in its value list");
  }
  for (const auto& q : f.params)
    if (!p.count(q.name)) throw Error("family " + f.name + ": point '" + point_key(p) + "' misses parameter " + q.name);
}

Point parse_point(const KernelFamily& f, const std::string& text) {
  Point p = f.default_point();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) throw Error("bad point item '" + item + "' (expected name=value)");
    p[item.substr(0, eq)] = parse_int(item.substr(eq + 1), item.substr(0, eq));
  }
  validate_point(f, p);
  return p;
}

std::string compare_output(const BufferSpec& spec, const std::vector<uint8_t>& got, const Expected& want) {
  const size_t n = want.values.size();
  if (got.size() < n * dtype_size(spec.dtype))
    return spec.name + ": device buffer has " + std::to_string(got.size()) + " bytes, expected " +
           std::to_string(n * dtype_size(spec.dtype));
  size_t bad = 0, first = n;
  float first_got = 0;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    float g = 0;
    if (spec.dtype == DType::F16) {
      uint16_t h;
      std::memcpy(&h, got.data() + 2 * i, 2);
      g = half_bits_to_float(h);
    } else if (spec.dtype == DType::F32) {
      std::memcpy(&g, got.data() + 4 * i, 4);
    } else {
      int32_t v;
      std::memcpy(&v, got.data() + 4 * i, 4);
      g = float(v);
    }
    const double w = want.values[i];
    const double err = double(g) == w ? 0.0 : std::fabs(double(g) - w);
    // A non-finite expected value must be met exactly: its relative tolerance would be infinite.
    const double tol = std::isfinite(w) ? want.abs_tol + want.rel_tol * std::fabs(w) : 0.0;
    if (!(err <= tol)) {  // NaN fails
      if (first == n) first = i, first_got = g;
      ++bad;
    }
    if (std::isfinite(err) && err > worst) worst = err;
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << spec.name << ": " << bad << " of " << n << " values out of tolerance; first at index " << first << ": got "
     << first_got << ", want " << want.values[first] << " (abs " << want.abs_tol << " + rel " << want.rel_tol
     << "); max abs error " << worst;
  return os.str();
}

}  // namespace qt::kernels
