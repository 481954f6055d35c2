#include "kernels_src/activation/swiglu_family.h"

#include <climits>
#include <cmath>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::activation {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"M", "N"};

std::string kernel_name(const Point& p) { return name_expr("swiglu_kernel", {p.at("threads"), p.at("vec")}); }

// fp16 values uniform in [-range, range); a few planted extremes check that exp(-g) overflowing to
// infinity (g << 0) gives -0 * u rather than NaN, and that large positive g passes through.
std::vector<uint16_t> random_halves(int64_t count, float range, Rng& rng, bool plant) {
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (auto& h : v) h = float_to_half_bits(float((2.0 * rng.uniform() - 1.0) * range));
  if (plant) {
    const float extremes[] = {-100.0f, -20.0f, 0.0f, 30.0f, 1000.0f};
    for (size_t i = 0; i < std::size(extremes) && i < v.size(); ++i) v[i * v.size() / std::size(extremes)] = float_to_half_bits(extremes[i]);
  }
  return v;
}

KernelFamily make_swiglu() {
  KernelFamily f;
  f.name = "swiglu";
  f.op = "swiglu";
  f.dtypes = "f16->f16";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "activation/swiglu.cuh";
  f.summary = "h = fp16(silu(gate) * up) over [M][N], VEC elements per thread with one vector access";
  f.min_sm = 80;
  f.params = {{"threads", {64, 128, 256, 512}, 256, "threads per block"},
              {"vec", {2, 4, 8}, 8, "fp16 elements per thread (4, 8 or 16-byte accesses)"}};
  f.defaults = {{{"threads", 256}, {"vec", 8}}, {{"threads", 128}, {"vec", 2}}};
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [](const Point&, const Shape& s) {
    if (s["M"] < 1 || s["N"] < 1) return std::string("M and N must be positive");
    if (s["M"] > INT64_MAX / s["N"]) return std::string("M*N overflows");
    return std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{kernel_name(p)}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t count = s["M"] * s["N"];
    LaunchPlan plan;
    plan.buffers = {{"gate", DType::F16, count, Role::Input},
                    {"up", DType::F16, count, Role::Input},
                    {"h", DType::F16, count, Role::Output}};
    Launch l;
    l.kernel = kernel_name(p);
    l.grid.x = static_cast<uint32_t>(cdiv(count, p.at("threads") * p.at("vec")));
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    l.args = {KernelArg::buf("gate"), KernelArg::buf("up"), KernelArg::buf("h"), KernelArg::i64(count)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    const int64_t count = s["M"] * s["N"];
    HostBuffers in;
    in["gate"] = bytes_of(random_halves(count, 8.0f, rng, true));
    in["up"] = bytes_of(random_halves(count, 4.0f, rng, false));
    return in;
  };
  f.reference = [](const Shape&, const HostBuffers& in) {
    const auto gate = from_bytes<uint16_t>(in.at("gate"));
    const auto up = from_bytes<uint16_t>(in.at("up"));
    Expected e;
    e.buffer = "h";
    e.values.resize(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = half_bits_to_float(gate[i]);
      e.values[i] = float(g / (1.0 + std::exp(-g)) * half_bits_to_float(up[i]));
    }
    // The kernel's fp32 exp, division and product err by a few 2^-24 relative; the one fp16 rounding adds
    // up to 2^-11. rel 2^-10 covers both; abs 2^-24 is the fp16 subnormal spacing for results near zero.
    e.rel_tol = std::ldexp(1.0, -10);
    e.abs_tol = std::ldexp(1.0, -24);
    return std::vector<Expected>{e};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    return std::vector<Shape>{Shape{kDims, {1, c.hidden_dim}, "mlp decode"}, Shape{kDims, {512, c.hidden_dim}, "mlp prefill"}};
  };
  f.probe_shape = Shape{kDims, {8, 12288}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 3072}, "Qwen3-0.6B hidden, decode"},
                   Shape{kDims, {5, 37}, "odd: 185 elements, a tail in every vector width"},
                   Shape{kDims, {4, 200}, "M=4, N not a multiple of the block's span"}};
  return f;
}

}  // namespace

const KernelFamily& swiglu_family() {
  static const KernelFamily f = make_swiglu();
  return f;
}

}  // namespace qt::kernels::activation
