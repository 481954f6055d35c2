#include "kernels_src/norm/rmsnorm_family.h"

#include <climits>
#include <cmath>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::norm {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"M", "N", "R"};
constexpr double kEps = 1e-6;  // Qwen3's rms_norm_eps, the test value of the scalar "eps"

std::string kernel_name(const Point& p) { return name_expr("rmsnorm_kernel", {p.at("threads"), p.at("vec")}); }

std::vector<uint16_t> random_halves(int64_t count, double lo, double hi, Rng& rng) {
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (auto& h : v) h = float_to_half_bits(float(lo + (hi - lo) * rng.uniform()));
  return v;
}

KernelFamily make_rmsnorm() {
  KernelFamily f;
  f.name = "rmsnorm";
  f.op = "rmsnorm";
  f.dtypes = "f16->f16";
  f.dims = kDims;
  f.scalars = {{"eps", DType::F32, kEps}};
  f.source_hash = kFamilySourceHash;
  f.source = "norm/rmsnorm.cuh";
  f.summary = "RMSNorm per row (block per row, fp32 statistics), residual add x += r fused when R = 1";
  f.min_sm = 80;
  f.params = {{"threads", {64, 128, 256, 512, 1024}, 256, "threads per block (one block per row)"},
              {"vec", {2, 4, 8}, 8, "fp16 elements per thread and access (4, 8 or 16 bytes)"}};
  f.defaults = {{{"threads", 256}, {"vec", 8}}, {{"threads", 128}, {"vec", 2}}};
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [](const Point& p, const Shape& s) {
    if (s["M"] < 1 || s["N"] < 1) return std::string("M and N must be positive");
    if (s["R"] != 0 && s["R"] != 1) return std::string("R must be 0 (plain) or 1 (residual add)");
    if (s["N"] > INT32_MAX) return std::string("N must stay below 2^31 (32-bit kernel indexing)");
    if (s["N"] % p.at("vec")) return "N must be a multiple of vec=" + std::to_string(p.at("vec")) + " (aligned rows)";
    return std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{kernel_name(p)}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], n = s["N"], r = s["R"];
    LaunchPlan plan;
    plan.buffers = {{"x", DType::F16, m * n, Role::InOut},
                    {"r", DType::F16, r * m * n, Role::Input},
                    {"w", DType::F32, n, Role::Input},
                    {"y", DType::F16, m * n, Role::Output}};
    Launch l;
    l.kernel = kernel_name(p);
    l.grid.x = static_cast<uint32_t>(m);
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    l.args = {KernelArg::buf("x"), KernelArg::buf("r"),  KernelArg::buf("w"),         KernelArg::buf("y"),
              KernelArg::i32(n),   KernelArg::i32(r),    KernelArg::scalar("eps")};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    const int64_t m = s["M"], n = s["N"], r = s["R"];
    std::vector<float> w(static_cast<size_t>(n));
    for (auto& v : w) v = float(0.5 + rng.uniform());
    HostBuffers in;
    in["x"] = bytes_of(random_halves(m * n, -2.0, 2.0, rng));
    in["r"] = bytes_of(random_halves(r * m * n, -2.0, 2.0, rng));
    in["w"] = bytes_of(w);
    return in;
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const int64_t m = s["M"], n = s["N"], r = s["R"];
    auto x = from_bytes<uint16_t>(in.at("x"));
    const auto add = from_bytes<uint16_t>(in.at("r"));
    const auto w = from_bytes<float>(in.at("w"));
    if (r)
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = float_to_half_bits(half_bits_to_float(x[i]) + half_bits_to_float(add[i]));
    Expected ex{"x", {}, 0.0, 0.0}, ey{"y", {}, 0.0, 0.0};  // x: fp16 sums, bit-exact
    ex.values.resize(x.size());
    ey.values.resize(x.size());
    for (int64_t row = 0; row < m; ++row) {
      double ss = 0;
      for (int64_t c = 0; c < n; ++c) {
        const double v = half_bits_to_float(x[size_t(row * n + c)]);
        ss += v * v;
      }
      const double inv = 1.0 / std::sqrt(ss / double(n) + kEps);
      for (int64_t c = 0; c < n; ++c) {
        const size_t i = size_t(row * n + c);
        ex.values[i] = half_bits_to_float(x[i]);
        ey.values[i] = float(w[size_t(c)] * (half_bits_to_float(x[i]) * inv));
      }
    }
    // y before its fp16 rounding: the fp32 sum of N squares errs by at most (N-1) 2^-24 relative, halved by
    // the square root; the division by N, + eps, rsqrtf (2 ulp) and two products add under 16 * 2^-24. The
    // one fp16 rounding adds 2^-11 relative, or 2^-25 absolute for subnormal results.
    ey.rel_tol = std::ldexp(1.0, -11) + (double(n) / 2 + 16) * std::ldexp(1.0, -24);
    ey.abs_tol = std::ldexp(1.0, -24);
    // y first: the tuner (tuner/family) applies the first output's tolerance to every output.
    return std::vector<Expected>{ey, ex};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    std::vector<Shape> out;
    for (int64_t m : {1, 512})
      for (int64_t r : {0, 1})
        out.push_back(Shape{kDims, {m, c.dim, r}, std::string(m == 1 ? "decode" : "prefill") + (r ? ", residual add" : ", first norm")});
    return out;
  };
  f.probe_shape = Shape{kDims, {8, 4096, 1}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 1024, 1}, "Qwen3-0.6B dim, decode, residual add"},
                   Shape{kDims, {3, 40, 0}, "odd: N=40, plain"},
                   Shape{kDims, {2, 200, 1}, "N=200 not a multiple of the block's span, residual add"},
                   Shape{kDims, {3, 36, 0}, "N=36: only vec 2 and 4 align"}};
  return f;
}

}  // namespace

const KernelFamily& rmsnorm_family() {
  static const KernelFamily f = make_rmsnorm();
  return f;
}

}  // namespace qt::kernels::norm
