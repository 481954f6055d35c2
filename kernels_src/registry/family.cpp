#include "kernels_src/registry/family.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/half.h"
#include "common/parallel_ranges.h"

namespace qt::kernels {

namespace {

struct DTypeInfo {
  DType type;
  const char* name;
  int size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 4}, {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2}, {DType::I8, "i8", 1},
    {DType::U8, "u8", 1},   {DType::I32, "i32", 4}, {DType::I64, "i64", 8},
};

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d;
  throw Error("unknown element type " + std::to_string(int(t)), kExitFailure);
}

template <class T>
T load(const uint8_t* data, size_t i) {
  T v;
  std::memcpy(&v, data + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

int dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }

double decode_element(DType t, const uint8_t* data, size_t i) {
  switch (t) {
    case DType::F32: return load<float>(data, i);
    case DType::F16: return half_bits_to_float(load<uint16_t>(data, i));
    case DType::BF16: return bf16_bits_to_float(load<uint16_t>(data, i));
    case DType::I8: return load<int8_t>(data, i);
    case DType::U8: return load<uint8_t>(data, i);
    case DType::I32: return load<int32_t>(data, i);
    case DType::I64: return double(load<int64_t>(data, i));
  }
  throw Error("unknown element type " + std::to_string(int(t)), kExitFailure);
}

int64_t Shape::operator[](std::string_view name) const {
  for (size_t i = 0; i < names.size() && i < values.size(); ++i)
    if (names[i] == name) return values[i];
  throw Error("shape '" + shape_key(*this) + "' has no dimension " + std::string(name), kExitFailure);
}

std::string shape_key(const Shape& s) {
  std::string k;
  for (size_t i = 0; i < s.values.size(); ++i)
    k += (i ? " " : "") + (i < s.names.size() ? s.names[i] : "d" + std::to_string(i)) + "=" + std::to_string(s.values[i]);
  return k;
}

std::string point_key(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

const BufferSpec& LaunchPlan::buffer(const std::string& name) const {
  for (const auto& b : buffers)
    if (b.name == name) return b;
  throw Error("launch plan has no buffer '" + name + "'", kExitFailure);
}

Shape KernelFamily::shape(std::vector<int64_t> values, std::string label) const {
  if (values.size() != dims.size()) {
    std::string names;
    for (const auto& d : dims) names += (names.empty() ? "" : ",") + d;
    throw Error("family " + name + " takes a shape of " + std::to_string(dims.size()) + " dimensions [" + names +
                "], got " + std::to_string(values.size()));
  }
  return Shape{dims, std::move(values), std::move(label)};
}

Shape KernelFamily::shape_from(const Shape& other) const {
  std::vector<int64_t> values;
  for (const auto& d : dims) values.push_back(other[d]);
  return Shape{dims, std::move(values), other.label};
}

Point KernelFamily::default_point() const {
  Point p;
  for (const auto& prm : params) p[prm.name] = prm.default_value;
  return p;
}

std::vector<Point> KernelFamily::default_points() const {
  return defaults.empty() ? std::vector<Point>{default_point()} : defaults;
}

std::vector<Point> KernelFamily::default_points(const Shape& shape) const {
  return defaults_for ? defaults_for(shape) : default_points();
}

bool KernelFamily::serves(WeightType t) const {
  for (WeightType w : weight_types)
    if (w == t) return true;
  return false;
}

const ScalarSpec& KernelFamily::scalar(std::string_view scalar_name) const {
  for (const ScalarSpec& s : scalars)
    if (s.name == scalar_name) return s;
  throw Error("family " + name + " declares no run-time scalar '" + std::string(scalar_name) + "'", kExitFailure);
}

std::vector<Point> lead_with(const std::vector<Point>& leaders, const std::vector<Point>& all) {
  std::vector<Point> out = leaders;
  for (const Point& p : all)
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
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

std::optional<int64_t> label_value(const Param& p, std::string_view label) {
  for (size_t i = 0; i < p.values.size() && i < p.labels.size(); ++i)
    if (p.labels[i] == label) return p.values[i];
  return std::nullopt;
}

std::string value_text(const Param& p, int64_t value) {
  for (size_t i = 0; i < p.values.size() && i < p.labels.size(); ++i)
    if (p.values[i] == value) return p.labels[i];
  return std::to_string(value);
}

Point parse_point(const KernelFamily& f, const std::string& text) {
  Point p = f.default_point();
  std::stringstream ss(text);
  std::string item;
  std::set<std::string> given;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) throw Error("bad point item '" + item + "' (expected name=value)");
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    // "bm=64,bm=128" would keep one of the two without saying which the user meant.
    if (!given.insert(name).second) throw Error("point '" + text + "' gives " + name + " twice");
    std::optional<int64_t> labelled;
    for (const auto& prm : f.params)
      if (prm.name == name) labelled = label_value(prm, value);
    p[name] = labelled ? *labelled : parse_int(value, name);
  }
  validate_point(f, p);
  return p;
}

std::string compare_output(const BufferSpec& spec, const std::vector<uint8_t>& got, const Expected& want) {
  const size_t n = want.values.size();
  const size_t need = n * size_t(dtype_size(spec.dtype));
  if (got.size() < need)
    return spec.name + ": buffer has " + std::to_string(got.size()) + " bytes, expected " + std::to_string(need);
  size_t bad = 0, first = n;
  double first_got = 0, worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = decode_element(spec.dtype, got.data(), i);
    const double w = want.values[i];
    const double err = g == w ? 0.0 : std::fabs(g - w);
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

LinearSums cpu_linear_sums(const LinearOperands& ops) {
  const size_t m = size_t(ops.m), n = size_t(ops.n), k = size_t(ops.k);
  if (ops.m < 0 || ops.n < 0 || ops.k < 0 || ops.a.size() != m * k || ops.w.size() != k * n ||
      (!ops.g.empty() && ops.g.size() != m * k))
    throw Error("linear reference: operand sizes do not match M=" + std::to_string(ops.m) + ", N=" +
                    std::to_string(ops.n) + ", K=" + std::to_string(ops.k),
                kExitFailure);
  LinearSums s;
  s.y.assign(m * n, 0.0f);
  s.abs.assign(m * n, 0.0f);
  if (!ops.g.empty()) s.g_abs.assign(m * n, 0.0f);
  // Rows [r0, r1) and columns [c0, c1): every sum in K order, so any split gives the same bits.
  auto block = [&](size_t r0, size_t r1, size_t c0, size_t c1) {
    const size_t w_cols = c1 - c0;
    std::vector<double> y(w_cols), a(w_cols), g(w_cols);
    for (size_t r = r0; r < r1; ++r) {
      std::fill(y.begin(), y.end(), 0.0), std::fill(a.begin(), a.end(), 0.0), std::fill(g.begin(), g.end(), 0.0);
      for (size_t kk = 0; kk < k; ++kk) {
        const double x = ops.a[r * k + kk], gx = ops.g.empty() ? 0.0 : double(ops.g[r * k + kk]);
        const float* w = ops.w.data() + kk * n + c0;
        for (size_t c = 0; c < w_cols; ++c) {
          const double p = x * double(w[c]);  // exact: two fp32 values
          y[c] += p;
          a[c] += std::fabs(p);
          if (gx != 0.0) g[c] += gx * std::fabs(double(w[c]));
        }
      }
      for (size_t c = 0; c < w_cols; ++c) {
        s.y[r * n + c0 + c] = float(y[c]);
        s.abs[r * n + c0 + c] = float(a[c]);
        if (!ops.g.empty()) s.g_abs[r * n + c0 + c] = float(g[c]);
      }
    }
  };
  // Spread over every core when the product is large: rows for a tuner's prefill shapes, columns for its
  // decode shapes, whose few rows would leave most cores idle.
  const double work = double(m) * double(n) * double(k);
  if (m >= 16)
    parallel_ranges(ops.m, work, [&](int64_t r0, int64_t r1) { block(size_t(r0), size_t(r1), 0, n); });
  else
    parallel_ranges(ops.n, work, [&](int64_t c0, int64_t c1) { block(0, m, size_t(c0), size_t(c1)); });
  return s;
}

std::string linear_dtypes(WeightType w, DType activation, DType output) {
  // These strings key stored results: the traits table's short names never change.
  return std::string(weight_traits(w).short_name) + "x" + dtype_name(activation) + "->" + dtype_name(output);
}

std::string point_runs(const KernelFamily& f, const Point& p, const Shape& shape) {
  if (f.point_constraint)
    if (std::string why = f.point_constraint(p); !why.empty()) return why;
  if (f.shape_constraint) return f.shape_constraint(p, shape);
  return "";
}

std::vector<Neighbour> one_parameter_neighbours(const KernelFamily& f, const Point& point, const Shape& shape) {
  std::vector<Neighbour> out;
  for (const Point& d : f.default_points(shape)) {
    if (d.size() != point.size()) continue;
    const Param* differs = nullptr;
    int count = 0;
    for (const Param& prm : f.params)
      if (d.count(prm.name) && point.count(prm.name) && d.at(prm.name) != point.at(prm.name)) differs = &prm, ++count;
    if (count != 1 || !differs->report_ab || !point_runs(f, d, shape).empty()) continue;
    bool seen = false;
    for (const Neighbour& n : out) seen = seen || n.point == d;
    if (!seen) out.push_back({differs->name, value_text(*differs, d.at(differs->name)), d});
  }
  return out;
}

bool is_activation_buffer(const std::string& name) { return name == "x" || name == "xq" || name == "xs"; }

bool is_weight_buffer(const BufferSpec& b) {
  return b.role == BufferSpec::Role::Input && !is_activation_buffer(b.name) && b.name != "ids";
}

bool launch_reads(const Launch& l, const std::string& buffer) {
  return std::any_of(l.args.begin(), l.args.end(),
                     [&](const KernelArg& a) { return a.kind == KernelArg::Kind::Buffer && a.buffer == buffer; });
}

double plan_bytes_moved(const LaunchPlan& plan) {
  double bytes = 0;
  for (const BufferSpec& b : plan.buffers) bytes += double(b.bytes()) * (b.role == BufferSpec::Role::Workspace ? 2 : 1);
  return bytes;
}

size_t main_launch(const LaunchPlan& plan) {
  for (size_t i = 0; i < plan.launches.size(); ++i)
    for (const BufferSpec& b : plan.buffers)
      if (is_weight_buffer(b) && launch_reads(plan.launches[i], b.name))
        return i;
  size_t widest = 0;
  for (size_t i = 0; i < plan.launches.size(); ++i)
    if (plan.launches[i].grid.count() * plan.launches[i].block.count() >
        plan.launches[widest].grid.count() * plan.launches[widest].block.count())
      widest = i;
  return widest;
}

}  // namespace qt::kernels
