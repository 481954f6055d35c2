#include "kernels_src/rope_kv/rope_kv_family.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/rope_kv/rope_kv_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::rope_kv {
namespace {

using Role = BufferSpec::Role;

const std::vector<std::string> kDims = {"M", "H", "KVH", "D", "C", "P"};
constexpr float kTestEps = 1e-6f, kTestTheta = 1e6f;  // Qwen3's values

RopeProblem problem(const Shape& s) {
  RopeProblem p;
  p.m = s["M"], p.heads = s["H"], p.kv_heads = s["KVH"], p.head_dim = s["D"], p.capacity = s["C"], p.pos0 = s["P"];
  p.eps = kTestEps, p.theta = kTestTheta;
  return p;
}

std::string kernel_name(const Point& pt) {
  return name_expr("qk_norm_rope_kv_kernel", {pt.at("warps"), pt.at("lanes"), pt.at("vec")});
}


std::string shape_check(const RopeProblem& p) {
  if (p.m < 1 || p.heads < 1 || p.kv_heads < 1 || p.head_dim < 1 || p.capacity < 1)
    return "M, H, KVH, D and C must be positive";
  if (p.heads % p.kv_heads) return "H must be a multiple of KVH (grouped-query attention)";
  if (p.head_dim % 2) return "the head dim D must be even (NeoX pairs i and i + D/2)";
  if (p.head_dim > 256) return "the head dim D must be at most 256";
  if (p.pos0 < 0 || p.pos0 + p.m > p.capacity) return "the tokens P .. P+M-1 must fit the cache: P + M <= C";
  if (p.m * (p.heads + p.kv_heads) > INT32_MAX) return "M*(H+KVH) must stay below 2^31 (32-bit work items)";
  return "";
}

std::vector<uint16_t> random_half(Rng& rng, int64_t n, double lo, double hi) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = float_to_half_bits(float(lo + (hi - lo) * rng.uniform()));
  return v;
}

HostBuffers make_inputs(const Shape& shape, uint64_t seed) {
  const RopeProblem p = problem(shape);
  Rng rng(seed);
  const int64_t qd = p.heads * p.head_dim, kvd = p.kv_heads * p.head_dim;
  HostBuffers in;
  in["q"] = bytes_of(random_half(rng, p.m * qd, -4, 4));
  in["k"] = bytes_of(random_half(rng, p.m * kvd, -4, 4));
  in["v"] = bytes_of(random_half(rng, p.m * kvd, -2, 2));
  std::vector<float> qn(size_t(p.head_dim)), kn(size_t(p.head_dim));
  for (auto& w : qn) w = float(0.5 + rng.uniform());
  for (auto& w : kn) w = float(0.5 + rng.uniform());
  in["q_norm"] = bytes_of(qn);
  in["k_norm"] = bytes_of(kn);
  in["pos"] = bytes_of(std::vector<int32_t>{int32_t(p.pos0)});
  // The cache holds earlier tokens' rows everywhere: rows the kernel must leave alone are checked too.
  in["k_cache"] = bytes_of(random_half(rng, p.capacity * kvd, -3, 3));
  in["v_cache"] = bytes_of(random_half(rng, p.capacity * kvd, -3, 3));
  return in;
}

// Tolerance. The kernel's fp32 pipeline (sum of squares, rsqrtf, products) stays within ~2^-20 of the double
// reference relative to |a| + |b| of a pair. The angle: kernel and reference both form the fp32 product
// float(pos) * inv_freq, but the kernel's inv_freq (exponent 2i * (1/D), then powf) may differ from
// transformers' by up to ~16 ulp (1 ulp of the exponent is ln(theta) ~ 14 ulp of the power at most, plus
// powf's own ulps), which moves the angle by up to 2^-20 * (P + M) radians; the reduced-range __cosf/__sinf add
// ~2^-21. Each of these errors multiplies |a| + |b|. The fp16 output rounds once (2^-11 relative); rel 2^-10
// leaves room for it.
std::vector<Expected> reference(const Shape& shape, const HostBuffers& in) {
  const RopeProblem p = problem(shape);
  const RopeResult r = reference_qk_norm_rope_kv(
      p, from_bytes<uint16_t>(in.at("q")), from_bytes<uint16_t>(in.at("k")), from_bytes<uint16_t>(in.at("v")),
      from_bytes<float>(in.at("q_norm")), from_bytes<float>(in.at("k_norm")), from_bytes<uint16_t>(in.at("k_cache")),
      from_bytes<uint16_t>(in.at("v_cache")));
  const double abs_tol = r.max_pair * (std::ldexp(1.0, -20) * double(p.pos0 + p.m) + std::ldexp(1.0, -18));
  const double rel_tol = std::ldexp(1.0, -10);
  auto expect = [&](const char* name, const std::vector<double>& values) {
    Expected e;
    e.buffer = name;
    e.values.assign(values.begin(), values.end());
    e.abs_tol = abs_tol, e.rel_tol = rel_tol;
    return e;
  };
  return {expect("q_out", r.q_out), expect("k_cache", r.k_cache), expect("v_cache", r.v_cache)};
}

// Decode (M = 1, a mid-context position) and a prefill chunk from position 0, at the model's cache capacity.
std::vector<Shape> model_shapes(const ModelConfig& c, const ModelWeights*) {
  const int64_t cap = std::max<int64_t>(c.max_seq_len, 1);
  const int64_t prefill = std::min<int64_t>(512, cap);
  return {Shape{kDims, {1, c.n_heads, c.n_kv_heads, c.head_dim, cap, std::min<int64_t>(cap - 1, 1023)}, "decode"},
          Shape{kDims, {prefill, c.n_heads, c.n_kv_heads, c.head_dim, cap, 0}, "prefill"}};
}

KernelFamily make_family() {
  KernelFamily f;
  f.name = "qk_norm_rope_kv";
  f.op = "qk_norm_rope_kv";
  f.dtypes = "f16->f16";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "rope_kv/qk_norm_rope_kv.cuh";
  f.summary = "per-head q/k RMSNorm + NeoX RoPE + KV-cache write; a lane group per head, pairs in registers";
  f.min_sm = 80;
  f.scalars = {{"eps", DType::F32, kTestEps}, {"theta", DType::F32, kTestTheta}};
  f.params = {{"warps", {1, 2, 4, 8}, 4, "warps per block"},
              {"lanes", {4, 8, 16, 32}, 8, "lanes per head (one work item per lane group)"},
              {"vec", {2, 4, 8}, 4, "halves per load and store (D/2 must be a multiple)"}};
  f.defaults = {{{"warps", 4}, {"lanes", 8}, {"vec", 4}}, {{"warps", 2}, {"lanes", 16}, {"vec", 2}}};
  f.point_constraint = [](const Point& pt) {
    if (pt.at("lanes") * pt.at("vec") > 128) return std::string("a lane group would cover more than 256 elements");
    return std::string();
  };
  f.shape_constraint = [](const Point& pt, const Shape& shape) {
    const RopeProblem p = problem(shape);
    std::string e = shape_check(p);
    if (e.empty() && (p.head_dim / 2) % pt.at("vec"))
      e = "D/2 must be a multiple of vec=" + std::to_string(pt.at("vec"));
    return e;
  };
  f.kernels = [](const Point& pt) { return std::vector<std::string>{kernel_name(pt)}; };
  // q, k and v in, q out, and the M new rows of each cache, not the caches' capacity: counting the buffers put
  // the model at 400-1,300x the H200's 7.6 us at a 40,960-token capacity.
  f.bytes_moved = [](const Point&, const Shape& shape) {
    const RopeProblem p = problem(shape);
    const double qd = double(p.heads * p.head_dim), kvd = double(p.kv_heads * p.head_dim), m = double(p.m);
    return 2.0 * m * (qd + 2 * kvd) + 2.0 * 4 * double(p.head_dim) + 4 + 2.0 * m * qd + 2.0 * 2 * m * kvd;
  };
  f.plan = [](const Point& pt, const Shape& shape) {
    const RopeProblem p = problem(shape);
    const int64_t qd = p.heads * p.head_dim, kvd = p.kv_heads * p.head_dim;
    LaunchPlan plan;
    plan.buffers = {{"q", DType::F16, p.m * qd, Role::Input},
                    {"k", DType::F16, p.m * kvd, Role::Input},
                    {"v", DType::F16, p.m * kvd, Role::Input},
                    {"q_norm", DType::F32, p.head_dim, Role::Input},
                    {"k_norm", DType::F32, p.head_dim, Role::Input},
                    {"pos", DType::I32, 1, Role::Input},
                    {"q_out", DType::F16, p.m * qd, Role::Output},
                    {"k_cache", DType::F16, p.capacity * kvd, Role::InOut},
                    {"v_cache", DType::F16, p.capacity * kvd, Role::InOut}};
    Launch l;
    l.kernel = kernel_name(pt);
    const int64_t items_per_block = pt.at("warps") * 32 / pt.at("lanes");
    l.grid.x = static_cast<uint32_t>(cdiv(p.m * (p.heads + p.kv_heads), items_per_block));
    l.block.x = static_cast<uint32_t>(pt.at("warps") * 32);
    l.args = {KernelArg::buf("q"),         KernelArg::buf("k"),       KernelArg::buf("v"),
              KernelArg::buf("q_norm"),    KernelArg::buf("k_norm"),  KernelArg::buf("pos"),
              KernelArg::buf("q_out"),     KernelArg::buf("k_cache"), KernelArg::buf("v_cache"),
              KernelArg::i32(p.m),         KernelArg::i32(p.heads),   KernelArg::i32(p.kv_heads),
              KernelArg::i32(p.head_dim),  KernelArg::i32(p.capacity), KernelArg::scalar("eps"),
              KernelArg::scalar("theta")};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = make_inputs;
  f.reference = reference;
  f.model_shapes = model_shapes;
  f.probe_shape = Shape{kDims, {8, 32, 8, 128, 4096, 100}, "probe: Qwen3-8B heads"};
  f.test_shapes = {Shape{kDims, {2, 16, 8, 128, 8, 5}, "Qwen3-0.6B heads, two tokens at pos 5"},
                   Shape{kDims, {5, 4, 2, 40, 16, 3}, "tiny dense: D=40, prefill of 5 after 3 cached"},
                   Shape{kDims, {3, 6, 2, 32, 120, 117}, "D=32, last rows of the cache"},
                   Shape{kDims, {1, 3, 1, 48, 2000, 1500}, "D=48 decode at position 1500"},
                   Shape{kDims, {64, 16, 8, 128, 200, 100}, "Qwen3-0.6B heads, prefill of 64 after 100"}};
  return f;
}

}  // namespace

const KernelFamily& qk_norm_rope_kv_family() {
  static const KernelFamily f = make_family();
  return f;
}

}  // namespace qt::kernels::rope_kv
