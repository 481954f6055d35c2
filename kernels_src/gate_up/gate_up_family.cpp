#include "kernels_src/gate_up/gate_up_family.h"

#include <climits>
#include <cmath>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/awq/awq_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::gate_up {

double fp32_sum_error(int64_t k) { return 16.0 * std::sqrt(double(k)) * std::ldexp(1.0, -24); }

// h = silu(g) * u against the kernels' fp32 g and u, each within a * sum|x*w| of the exact value. silu' stays
// within [-0.1, 1.1], so h moves by at most 1.1 a_g |u| + |silu(g)| a_u + 1.1 a_g a_u; the largest such bound
// is the absolute tolerance. The fp32 silu and product and the one fp16 rounding stay within rel 2^-10.
Expected swiglu_expected(const Projections& p, double a) {
  Expected e;
  e.buffer = "h";
  double tol = 0;
  for (size_t i = 0; i < p.g.size(); ++i) {
    const double silu = p.g[i] / (1.0 + std::exp(-p.g[i]));
    e.values.push_back(float(silu * p.u[i]));
    const double ag = a * p.g_abs[i], au = a * p.u_abs[i];
    tol = std::max(tol, 1.1 * ag * std::abs(p.u[i]) + std::abs(silu) * au + 1.1 * ag * au);
  }
  e.abs_tol = tol + 1e-6;
  e.rel_tol = std::ldexp(1.0, -10);
  return e;
}

namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"M", "N", "K", "G"};
const char* kReduce = "gate_up_reduce_kernel<256>";

std::string common_check(const Shape& s) {
  const int64_t m = s["M"], n = s["N"], k = s["K"], g = s["G"];
  if (m < 1 || n < 1 || k < 1 || g < 1) return "M, N, K and G must be positive";
  if (m > 8) return "the fused GEMV serves M <= 8";
  if (k % g) return "K must be a multiple of the group size G";
  if (n > INT32_MAX / k || 2 * m * n > INT32_MAX) return "N*K and 2*M*N must stay below 2^31 (32-bit kernel indexing)";
  return "";
}

// The dense MLP's gate and up projections of weight type `t` (both of one shape: w1 and w3 share an entry of the
// model's linear shapes), at M = 1; with only a config, in the config's group (`config_group` where it has none).
std::vector<Shape> mlp_shapes(const ModelConfig& c, const ModelWeights* w, WeightType t, int64_t config_group) {
  return linear_family_shapes(
      c, w, 1,
      [t](const LinearShape& l) { return !l.expert && l.label.find("w1") != std::string::npos && (!l.type || *l.type == t); },
      [&](const LinearShape& l) { return l.type ? l.group : c.group_size > 0 ? int64_t(c.group_size) : config_group; });
}

// A plan: the main kernel (grid and block set) over `buffers`, an fp32 workspace [split][2][M][N], and for
// split > 1 the reduction that applies silu.
LaunchPlan gate_up_plan(std::vector<BufferSpec> buffers, Launch main, const Shape& s, int64_t split) {
  const int64_t m = s["M"], n = s["N"];
  LaunchPlan plan;
  plan.buffers = std::move(buffers);
  plan.buffers.push_back({"h", DType::F16, m * n, Role::Output});
  plan.buffers.push_back({"ws", DType::F32, split > 1 ? 2 * split * m * n : 1, Role::Workspace});
  for (const BufferSpec& b : plan.buffers) main.args.push_back(KernelArg::buf(b.name));
  for (const char* d : {"M", "N", "K", "G"}) main.args.push_back(KernelArg::i32(s[d]));
  plan.launches.push_back(main);
  if (split > 1) {
    Launch r;
    r.kernel = kReduce;
    r.grid.x = static_cast<uint32_t>(cdiv(m * n, 256));
    r.block.x = 256;
    r.args = {KernelArg::buf("ws"), KernelArg::buf("h"), KernelArg::i32(m * n), KernelArg::i32(split)};
    plan.launches.push_back(r);
  }
  return plan;
}

std::vector<std::string> with_reduce(const std::string& kernel, int64_t split) {
  std::vector<std::string> k = {kernel};
  if (split > 1) k.push_back(kReduce);
  return k;
}

// ---- Q8_0 ----

std::string q8_kernel(const Point& p) {
  return name_expr("gate_up_q8_0_kernel", {p.at("warps"), p.at("rows"), p.at("vec"), p.at("mt")});
}

// x in [-1, 1), codes over the whole int8 range, scales in [0.0005, 0.002) (weights up to ~0.25).
HostBuffers q8_inputs(const Shape& s, uint64_t seed) {
  const int64_t m = s["M"], n = s["N"], k = s["K"], g = s["G"];
  Rng rng(seed);
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = float_to_half_bits(float(2.0 * rng.uniform() - 1.0));
  HostBuffers in;
  in["x"] = bytes_of(x);
  for (const std::string w : {"gate", "up"}) {
    std::vector<int8_t> q(static_cast<size_t>(n * k));
    rng.fill_bytes(reinterpret_cast<uint8_t*>(q.data()), q.size());
    for (auto& v : q) v = int8_t(int(uint8_t(v)) - 128);
    std::vector<float> sc(static_cast<size_t>(n * k / g));
    for (auto& v : sc) v = float(0.0005 + 0.0015 * rng.uniform());
    in[w + "_q"] = bytes_of(q);
    in[w + "_scales"] = bytes_of(sc);
  }
  return in;
}

std::vector<Expected> q8_reference(const Shape& s, const HostBuffers& in) {
  const int64_t m = s["M"], n = s["N"], k = s["K"], g = s["G"];
  const auto x = from_bytes<uint16_t>(in.at("x"));
  Projections p;
  for (const std::string w : {"gate", "up"}) {
    const auto q = from_bytes<int8_t>(in.at(w + "_q"));
    const auto sc = from_bytes<float>(in.at(w + "_scales"));
    auto& out = w == "gate" ? p.g : p.u;
    auto& out_abs = w == "gate" ? p.g_abs : p.u_abs;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, abs_sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t flat = j * k + kk;
          const double t = double(half_bits_to_float(x[size_t(i * k + kk)])) * q[size_t(flat)] * sc[size_t(flat / g)];
          sum += t, abs_sum += std::abs(t);
        }
        out.push_back(sum);
        out_abs.push_back(abs_sum);
      }
  }
  return {swiglu_expected(p, fp32_sum_error(k))};
}

KernelFamily make_q8_0() {
  KernelFamily f;
  f.name = "gate_up_swiglu.q8_0";
  f.op = "gate_up_swiglu";
  f.weight_types = {WeightType::Q8_0};
  f.dtypes = linear_dtypes(WeightType::Q8_0, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "gate_up/gate_up_q8_0.cuh";
  f.summary = "fused decode gate+up GEMV + SwiGLU, Q8_0 weights: a warp per ROWS rows of both matrices, split-k";
  f.min_sm = 80;
  f.params = {{"warps", {2, 4, 8}, 4, "warps per block, each owning its own output rows"},
              {"rows", {1, 2, 4}, 1, "output rows per warp (of both matrices)"},
              {"vec", {4, 8, 16}, 16, "int8 weights per lane and access (4, 8 or 16 bytes)"},
              {"mt", {1, 2, 4, 8}, 1, "rows of M per block"},
              {"split_k", {1, 2, 4}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"warps", 4}, {"rows", 1}, {"vec", 16}, {"mt", 1}, {"split_k", 1}},
                {{"warps", 4}, {"rows", 2}, {"vec", 8}, {"mt", 4}, {"split_k", 2}},
                {{"warps", 8}, {"rows", 1}, {"vec", 4}, {"mt", 8}, {"split_k", 1}}};
  f.point_constraint = [](const Point& p) {
    if (p.at("mt") * p.at("rows") > 8) return std::string("more than 16 fp32 accumulators per lane");
    if (p.at("mt") * p.at("vec") > 32) return std::string("more than 16 words of x per lane");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& s) {
    std::string e = common_check(s);
    if (!e.empty()) return e;
    const int64_t vec = p.at("vec");
    if (s["G"] % vec) return "G must be a multiple of vec=" + std::to_string(vec) + " (one scale per access)";
    if (p.at("split_k") > cdiv(s["K"], 32 * vec)) return std::string("split_k exceeds the number of 32*vec chunks of K");
    return std::string();
  };
  f.kernels = [](const Point& p) { return with_reduce(q8_kernel(p), p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], n = s["N"], k = s["K"], g = s["G"];
    Launch l;
    l.kernel = q8_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(n, p.at("warps") * p.at("rows")));
    l.grid.y = static_cast<uint32_t>(cdiv(m, p.at("mt")));
    l.grid.z = static_cast<uint32_t>(p.at("split_k"));
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    return gate_up_plan({{"x", DType::F16, m * k, Role::Input},
                         {"gate_q", DType::I8, n * k, Role::Input},
                         {"gate_scales", DType::F32, n * k / g, Role::Input},
                         {"up_q", DType::I8, n * k, Role::Input},
                         {"up_scales", DType::F32, n * k / g, Role::Input}},
                        l, s, p.at("split_k"));
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = q8_inputs;
  f.reference = q8_reference;
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) { return mlp_shapes(c, w, WeightType::Q8_0, 64); };
  f.probe_shape = Shape{kDims, {8, 12288, 4096, 64}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 48, 1024, 64}, "Qwen3-0.6B w1+w3 decode, N cut to 48"},
                   Shape{kDims, {5, 41, 96, 32}, "odd: M=5, N=41 (partial warp rows), 3 groups"},
                   Shape{kDims, {8, 24, 528, 16}, "M=8, K=528: chunk tails at every vec"}};
  return f;
}

// ---- AWQ INT4 ----

std::string awq_kernel(const Point& p) { return name_expr("gate_up_awq_kernel", {p.at("warps"), p.at("vec"), p.at("mt")}); }

// Gate and up from independent seeds; both use the gate problem's activations.
std::pair<awq::AwqData, awq::AwqData> awq_problems(const Shape& s, uint64_t seed) {
  awq::AwqData g = awq::make_awq_data(s["M"], s["N"], s["K"], s["G"], seed);
  awq::AwqData u = awq::make_awq_data(s["M"], s["N"], s["K"], s["G"], seed ^ 0x9E3779B97F4A7C15ull);
  u.x = g.x;
  return {g, u};
}

KernelFamily make_awq_int4() {
  KernelFamily f;
  f.name = "gate_up_swiglu.awq_int4";
  f.op = "gate_up_swiglu";
  f.weight_types = {WeightType::AWQ_INT4};
  f.dtypes = linear_dtypes(WeightType::AWQ_INT4, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "gate_up/gate_up_awq.cuh";
  f.summary = "fused decode gate+up GEMV + SwiGLU, AWQ INT4: lanes own packed columns, warps split K, split-k";
  f.min_sm = 80;
  // A block covers 256*vec columns, so Qwen3-8B's N = 12288 makes only 48 blocks at vec 1: the first default
  // splits K four ways to give an H100's 132 SMs more than one block each.
  f.params = {{"warps", {2, 4, 8}, 8, "warps per block, each takes every warps-th row of K"},
              {"vec", {1, 2, 4}, 1, "packed words per lane and row of each matrix"},
              {"mt", {1, 2, 4}, 1, "rows of M per block"},
              {"split_k", {1, 2, 4, 8}, 4, "blocks along K, whole groups (fp32 workspace + reduction when > 1)"}};
  // The last default runs any shape the family accepts (no split, vec 1): small models have K/G < 4.
  f.defaults = {{{"warps", 8}, {"vec", 1}, {"mt", 1}, {"split_k", 4}},
                {{"warps", 4}, {"vec", 2}, {"mt", 2}, {"split_k", 2}},
                {{"warps", 2}, {"vec", 1}, {"mt", 4}, {"split_k", 1}}};
  f.point_constraint = [](const Point& p) {
    if (2 * p.at("mt") * p.at("vec") * 8 > 64) return std::string("more than 64 fp32 accumulators per thread");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& s) {
    std::string e = common_check(s);
    if (!e.empty()) return e;
    if (s["N"] % 8) return std::string("N must be a multiple of 8 (packed words)");
    if ((s["N"] / 8) % p.at("vec")) return "N/8 must be a multiple of vec=" + std::to_string(p.at("vec"));
    if (p.at("split_k") > s["K"] / s["G"]) return std::string("split_k exceeds the number of groups along K");
    return std::string();
  };
  f.kernels = [](const Point& p) { return with_reduce(awq_kernel(p), p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], n = s["N"], k = s["K"], g = s["G"];
    Launch l;
    l.kernel = awq_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(n / 8, 32 * p.at("vec")));
    l.grid.y = static_cast<uint32_t>(cdiv(m, p.at("mt")));
    l.grid.z = static_cast<uint32_t>(p.at("split_k"));
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    std::vector<BufferSpec> b = {{"x", DType::F16, m * k, Role::Input}};
    for (const std::string w : {"gate", "up"}) {
      b.push_back({w + "_qweight", DType::I32, k * n / 8, Role::Input});
      b.push_back({w + "_qzeros", DType::I32, k / g * n / 8, Role::Input});
      b.push_back({w + "_scales", DType::F16, k / g * n, Role::Input});
    }
    return gate_up_plan(std::move(b), l, s, p.at("split_k"));
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    const auto [g, u] = awq_problems(s, seed);
    return HostBuffers{{"x", bytes_of(g.x)},
                       {"gate_qweight", bytes_of(g.qweight)}, {"gate_qzeros", bytes_of(g.qzeros)}, {"gate_scales", bytes_of(g.scales)},
                       {"up_qweight", bytes_of(u.qweight)},   {"up_qzeros", bytes_of(u.qzeros)},   {"up_scales", bytes_of(u.scales)}};
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    auto data = [&](const std::string& w) {
      awq::AwqData d;
      d.m = s["M"], d.n = s["N"], d.k = s["K"], d.group = s["G"];
      d.x = from_bytes<uint16_t>(in.at("x"));
      d.qweight = from_bytes<int32_t>(in.at(w + "_qweight"));
      d.qzeros = from_bytes<int32_t>(in.at(w + "_qzeros"));
      d.scales = from_bytes<uint16_t>(in.at(w + "_scales"));
      return d;
    };
    Projections p;
    p.g = awq::reference_gemm(data("gate"), &p.g_abs);
    p.u = awq::reference_gemm(data("up"), &p.u_abs);
    return std::vector<Expected>{swiglu_expected(p, fp32_sum_error(s["K"]))};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) { return mlp_shapes(c, w, WeightType::AWQ_INT4, 128); };
  f.probe_shape = Shape{kDims, {8, 12288, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 64, 4096, 128}, "Qwen3-8B w1+w3 decode, N cut to 64"},
                   Shape{kDims, {5, 208, 160, 32}, "odd: M=5, 26 words, 5 groups of 32"},
                   Shape{kDims, {4, 576, 256, 64}, "M=4, N spans 3 blocks at vec=1"}};
  return f;
}

}  // namespace

const KernelFamily& q8_0_family() {
  static const KernelFamily f = make_q8_0();
  return f;
}
const KernelFamily& awq_int4_family() {
  static const KernelFamily f = make_awq_int4();
  return f;
}

}  // namespace qt::kernels::gate_up
