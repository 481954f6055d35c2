#include "kernels_src/f16_linear/f16_gemv_family.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::f16_linear {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"M", "N", "K", "G"};

std::string kernel_name(const Point& p) {
  return name_expr("f16_gemv_kernel", {p.at("warps"), p.at("rows"), p.at("vec"), p.at("mt")});
}

bool float_type(WeightType t) { return t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16; }

std::vector<uint16_t> random_halves(int64_t count, Rng& rng) {
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (auto& h : v) h = float_to_half_bits(float(2.0 * rng.uniform() - 1.0));
  return v;
}

}  // namespace

std::vector<Shape> f16_shapes(const ModelConfig& c, const ModelWeights* w, int64_t m) {
  return linear_family_shapes(
      c, w, m, [](const LinearShape& l) { return !l.expert && (!l.type || float_type(*l.type)); },
      [](const LinearShape& l) { return l.k; });
}

namespace {

KernelFamily make_gemv() {
  KernelFamily f;
  f.name = "f16_gemv";
  f.op = "linear";
  f.weight_types = {WeightType::F16};
  f.dtypes = linear_dtypes(WeightType::F16, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "f16_linear/f16_gemv.cuh";
  f.summary = "decode GEMV with fp16 weights [N][K], M = 1..8: a warp per ROWS output rows, split-k over blocks";
  f.min_sm = 80;
  f.params = {{"warps", {2, 4, 8}, 4, "warps per block, each owning its own output rows"},
              {"rows", {1, 2, 4}, 2, "output rows per warp"},
              {"vec", {2, 4, 8}, 8, "halves per lane and access (4, 8 or 16 bytes)"},
              {"mt", {1, 2, 4, 8}, 1, "rows of M per block"},
              {"split_k", {1, 2, 4, 8}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"warps", 4}, {"rows", 2}, {"vec", 8}, {"mt", 1}, {"split_k", 1}},
                {{"warps", 4}, {"rows", 1}, {"vec", 8}, {"mt", 8}, {"split_k", 2}},
                {{"warps", 8}, {"rows", 4}, {"vec", 4}, {"mt", 2}, {"split_k", 4}}};
  // A block's MT batch rows share each weight it reads: for M > 1 the defaults whose MT covers M come first, so
  // an untuned lm_head reads its weights once (at mt = 1 and M = 4 it took 1,100 us on the H200, four passes
  // over 1.2 GB, against 287 us at M = 1).
  f.defaults_for = [defaults = f.defaults](const Shape& s) {
    std::vector<Point> d = defaults;
    std::stable_partition(d.begin(), d.end(), [&](const Point& p) { return p.at("mt") >= std::min<int64_t>(s["M"], 8); });
    return d;
  };
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], n = s["N"], k = s["K"], vec = p.at("vec");
    if (m < 1 || n < 1 || k < 1) return std::string("M, N and K must be positive");
    if (m > 8) return std::string("GEMV serves M <= 8");
    if (s["G"] != k) return std::string("G must equal K for fp16 weights (no groups)");
    if (n > INT32_MAX || k > INT32_MAX || m * n > INT32_MAX) return std::string("M*N and K must stay below 2^31");
    if (k % vec) return "K must be a multiple of vec=" + std::to_string(vec) + " (aligned rows)";
    if (p.at("split_k") > cdiv(k, 32 * vec)) return std::string("split_k exceeds the number of 32*vec chunks of K");
    return std::string();
  };
  f.kernels = [](const Point& p) { return with_splitk_reduce({kernel_name(p)}, p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], n = s["N"], k = s["K"], split = p.at("split_k");
    LaunchPlan plan;
    plan.buffers = {{"x", DType::F16, m * k, Role::Input},
                    {"values", DType::F16, n * k, Role::Input},
                    {"y", DType::F16, m * n, Role::Output},
                    {"ws", DType::F32, split > 1 ? split * m * n : 1, Role::Workspace}};
    Launch l;
    l.kernel = kernel_name(p);
    l.grid.x = static_cast<uint32_t>(cdiv(n, p.at("warps") * p.at("rows")));
    l.grid.y = static_cast<uint32_t>(cdiv(m, p.at("mt")));
    l.grid.z = static_cast<uint32_t>(split);
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    l.args = {KernelArg::buf("x"), KernelArg::buf("values"), KernelArg::buf("y"), KernelArg::buf("ws"),
              KernelArg::i32(m),   KernelArg::i32(n),        KernelArg::i32(k)};
    plan.launches.push_back(l);
    if (split > 1) plan.launches.push_back(splitk_reduce_launch(m * n, split));
    return plan;
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    HostBuffers in;
    in["x"] = bytes_of(random_halves(s["M"] * s["K"], rng));
    in["values"] = bytes_of(random_halves(s["N"] * s["K"], rng));
    return in;
  };
  // fp32 accumulation in any order stays within a few sqrt(K) roundings of the largest partial sum (bounded
  // by sum |x*w|); the fp16 output adds at most half an ulp (rel 2^-11).
  set_linear_reference(f, fp16_linear_operands, [](const Shape& s, const HostBuffers&, const LinearSums& sums) {
    Expected e;
    e.buffer = "y";
    e.values = sums.y;
    e.abs_tol = 16.0 * std::sqrt(double(s["K"])) * std::ldexp(1.0, -24) * max_of(sums.abs) + 1e-6;
    e.rel_tol = std::ldexp(1.0, -10);
    return std::vector<Expected>{e};
  });
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) { return f16_shapes(c, w, 1); };
  f.probe_shape = Shape{kDims, {8, 1024, 4096, 4096}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 64, 4096, 4096}, "Qwen3-8B wq decode, N cut to 64"},
                   Shape{kDims, {5, 41, 200, 200}, "odd: M=5, N=41 (partial warp rows), K=200 (part of a chunk)"},
                   Shape{kDims, {8, 72, 1000, 1000}, "M=8, K=1000: chunk tails at every vec"}};
  return f;
}

}  // namespace

const KernelFamily& gemv_family() {
  static const KernelFamily f = make_gemv();
  return f;
}

}  // namespace qt::kernels::f16_linear
