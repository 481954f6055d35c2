#include "kernels_src/f16_gemm/f16_gemm_family.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/f16_linear/f16_gemv_family.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::f16_gemm {
namespace {

using Role = BufferSpec::Role;

struct Mnk {
  int64_t m, n, k, group;
};
Mnk mnk(const Shape& s) { return {s["M"], s["N"], s["K"], s["G"]}; }
const std::vector<std::string> kDims = {"M", "N", "K", "G"};

std::string kernel_name(const Point& p) {
  return name_expr("f16_gemm_kernel", {p.at("bm"), p.at("bn"), p.at("bk"), p.at("warps"), p.at("stages")});
}



std::string shape_check(const Point& p, const Shape& shape) {
  const Mnk s = mnk(shape);
  if (s.m < 1 || s.n < 1 || s.k < 1) return std::string("M, N and K must be positive");
  if (s.group != s.k) return "G must equal K for fp16 weights (got G=" + std::to_string(s.group) + ")";
  if (s.k % 8) return std::string("K must be a multiple of 8 (16-byte rows of fp16)");
  constexpr int64_t kMaxI32 = INT32_MAX;
  if (s.m > kMaxI32 / s.n || s.m > kMaxI32 / s.k || s.n > kMaxI32 / s.k)
    return std::string("M*N, M*K and N*K must stay below 2^31 (32-bit kernel indexing)");
  if (p.at("split_k") > cdiv(s.k, p.at("bk"))) return std::string("split_k exceeds the number of K tiles");
  return std::string();
}

HostBuffers make_inputs(const Shape& shape, uint64_t seed) {
  const Mnk s = mnk(shape);
  Rng rng(seed);
  std::vector<uint16_t> x(size_t(s.m * s.k)), w(size_t(s.n * s.k));
  for (auto& v : w) v = float_to_half_bits(static_cast<float>(0.2 * rng.uniform() - 0.1));
  for (auto& v : x) v = float_to_half_bits(static_cast<float>(2.0 * rng.uniform() - 1.0));
  return {{"x", bytes_of(x)}, {"values", bytes_of(w)}};
}

// Exact products of fp16 operands summed in double. The kernel sums them in fp32 (mma steps of 16, K/16 tile
// steps, the split-k sum): at most K/8 + 64 roundings along any path, each within 2^-24 of a partial sum
// bounded by sum |x * w|; the fp16 output adds half an ulp (rel 2^-11, 2^-10 leaves slack) or, near zero,
// half the subnormal spacing.
std::vector<Expected> expected(const Shape& shape, const HostBuffers&, const LinearSums& sums) {
  Expected e;
  e.buffer = "y";
  e.values = sums.y;
  e.abs_tol = double(shape["K"] / 8 + 64) * std::ldexp(1.0, -24) * max_of(sums.abs) + std::ldexp(1.0, -24);
  e.rel_tol = std::ldexp(1.0, -10);
  return {e};
}


KernelFamily make() {
  KernelFamily f;
  f.name = "f16_gemm";
  f.op = "linear";
  f.weight_types = {WeightType::F16};
  f.dtypes = linear_dtypes(WeightType::F16, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "f16_gemm/f16_gemm.cuh";
  f.summary = "fp16-weight tensor-core GEMM: cp.async pipeline, ldmatrix, mma.m16n8k16 (f32), split-k";
  f.min_sm = 80;
  f.params = {{"bm", {16, 32, 64}, 32, "tile rows (M)"},
              {"bn", {64, 128}, 64, "tile columns (N)"},
              {"bk", {32, 64}, 32, "tile depth (K)"},
              {"warps", {2, 4, 8}, 4, "warps per block, side by side along N"},
              {"stages", {2, 3, 4}, 3, "cp.async pipeline stages"},
              {"split_k", {1, 2, 4}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"bm", 16}, {"bn", 64}, {"bk", 32}, {"warps", 2}, {"stages", 2}, {"split_k", 2}},
                {{"bm", 32}, {"bn", 64}, {"bk", 32}, {"warps", 4}, {"stages", 3}, {"split_k", 1}},
                {{"bm", 64}, {"bn", 128}, {"bk", 64}, {"warps", 4}, {"stages", 3}, {"split_k", 1}}};
  f.point_constraint = [](const Point& p) {
    const int64_t nf = p.at("bn") / (8 * p.at("warps"));
    if (nf < 1) return std::string("fewer than 8 columns per warp");
    if (p.at("bm") / 16 * nf * 4 > 128) return std::string("more than 128 fp32 accumulators per thread");
    return std::string();
  };
  f.shape_constraint = shape_check;
  f.kernels = [](const Point& p) { return with_splitk_reduce({kernel_name(p)}, p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnk s = mnk(shape);
    const int64_t split = p.at("split_k");
    LaunchPlan plan;
    plan.buffers = {{"x", DType::F16, s.m * s.k, Role::Input},
                    {"values", DType::F16, s.n * s.k, Role::Input},
                    {"y", DType::F16, s.m * s.n, Role::Output},
                    {"ws", DType::F32, split > 1 ? split * s.m * s.n : 1, Role::Workspace}};
    Launch l;
    l.kernel = kernel_name(p);
    l.grid.x = static_cast<uint32_t>(cdiv(s.n, p.at("bn")));
    l.grid.y = static_cast<uint32_t>(cdiv(s.m, p.at("bm")));
    l.grid.z = static_cast<uint32_t>(split);
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    l.dynamic_smem = smem_bytes(p);
    l.args = {KernelArg::buf("x"),  KernelArg::buf("values"), KernelArg::buf("y"),  KernelArg::buf("ws"),
              KernelArg::i32(s.m), KernelArg::i32(s.n),       KernelArg::i32(s.k)};
    plan.launches.push_back(l);
    if (split > 1) plan.launches.push_back(splitk_reduce_launch(s.m * s.n, split));
    return plan;
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = make_inputs;
  set_linear_reference(f, fp16_linear_operands, expected);
  f.probe_shape = Shape{kDims, {64, 1024, 4096, 4096}, "probe"};
  f.test_shapes = {Shape{kDims, {17, 128, 1024, 1024}, "Qwen3-0.6B lm_head prefill: M=17, N cut to 128"},
                   Shape{kDims, {3, 72, 200, 200}, "odd: M=3, N=72 (a partial N tile), K=200 (a partial K tile)"},
                   Shape{kDims, {70, 160, 160, 160}, "M=70: tails in every M tile; N=160"},
                   Shape{kDims, {5, 37, 64, 64}, "odd N=37 (scalar stores), one K tile"},
                   Shape{kDims, {1, 64, 1000, 1000}, "M=1, K=1000 (a partial K tile)"}};
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) { return f16_linear::f16_shapes(c, w, 256); };
  return f;
}

}  // namespace

int64_t smem_bytes(const Point& p) {
  // Mirrors F16GemmTile: A and B tiles of BK + 8 halves per row, per stage.
  return p.at("stages") * (p.at("bm") + p.at("bn")) * (p.at("bk") + 8) * 2;
}

const KernelFamily& gemm_family() {
  static const KernelFamily f = make();
  return f;
}

}  // namespace qt::kernels::f16_gemm
