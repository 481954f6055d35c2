#include "kernels_src/awq/awq_family.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <map>

#include "common/half.h"
#include "kernels_src/awq/awq_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::awq {
namespace {

using Role = BufferSpec::Role;

// The AWQ problem: y[M][N] = x[M][K] * W[K][N] with groups of G along K, read from the family's named dims.
struct Mnkg {
  int64_t m, n, k, group;
};
Mnkg mnkg(const Shape& s) { return {s["M"], s["N"], s["K"], s["G"]}; }
const std::vector<std::string> kDims = {"M", "N", "K", "G"};


std::string common_shape_check(const Mnkg& s) {
  if (s.m < 1 || s.n < 1 || s.k < 1 || s.group < 1) return "M, N, K and G must be positive";
  if (s.n % 8) return "N must be a multiple of 8 (packed words)";
  if (s.group % 16) return "group size must be a multiple of 16";
  if (s.k % s.group) return "K must be a multiple of the group size";
  // Kernel arguments are int32 and the split-k reduction indexes M*N elements with an int.
  constexpr int64_t kMaxI32 = INT32_MAX;
  if (s.m > kMaxI32 / s.n || s.k > kMaxI32) return "M*N and K must stay below 2^31 (32-bit kernel indexing)";
  return "";
}

HostBuffers awq_inputs(const Shape& shape, uint64_t seed) {
  const Mnkg s = mnkg(shape);
  const AwqData d = make_awq_data(s.m, s.n, s.k, s.group, seed);
  return {{"x", bytes_of(d.x)}, {"qweight", bytes_of(d.qweight)}, {"qzeros", bytes_of(d.qzeros)},
          {"scales", bytes_of(d.scales)}};
}

AwqData data_from(const Mnkg& s, const HostBuffers& in) {
  AwqData d;
  d.m = s.m, d.n = s.n, d.k = s.k, d.group = s.group;
  d.x = from_bytes<uint16_t>(in.at("x"));
  d.qweight = from_bytes<int32_t>(in.at("qweight"));
  d.qzeros = from_bytes<int32_t>(in.at("qzeros"));
  d.scales = from_bytes<uint16_t>(in.at("scales"));
  return d;
}

// GEMM-type expectation: fp32 accumulation in any order stays within a few sqrt(K) roundings of the
// largest partial sum (bounded by sum |x*w|); the fp16 output adds at most half an ulp (rel 2^-11). The
// emulator rounds each mma once, tensor cores truncate inside it: up to K <= 16384 the first term also
// covers one ulp of the largest partial sum per mma (kernels_src/common/README.md, "Where the emulator
// differs from a GPU").
LinearOperands gemm_operands(const Shape& shape, const HostBuffers& in) {
  const Mnkg s = mnkg(shape);
  const AwqData d = data_from(s, in);
  LinearOperands ops;
  ops.m = s.m, ops.n = s.n, ops.k = s.k;
  ops.a.resize(d.x.size());
  for (size_t i = 0; i < d.x.size(); ++i) ops.a[i] = half_bits_to_float(d.x[i]);
  ops.w = reference_dequant(d);  // [K][N]
  return ops;
}

std::vector<Expected> gemm_expected(const Shape& shape, const HostBuffers&, const LinearSums& sums) {
  Expected e;
  e.buffer = "y";
  e.values = sums.y;
  e.abs_tol = 16.0 * std::sqrt(double(shape["K"])) * std::ldexp(1.0, -24) * max_of(sums.abs) + 1e-6;
  e.rel_tol = std::ldexp(1.0, -10);
  return {e};
}

std::vector<BufferSpec> awq_buffers(const Mnkg& s) {
  return {{"x", DType::F16, s.m * s.k, Role::Input},
          {"qweight", DType::I32, s.k * s.n / 8, Role::Input},
          {"qzeros", DType::I32, s.k / s.group * s.n / 8, Role::Input},
          {"scales", DType::F16, s.k / s.group * s.n, Role::Input},
          {"y", DType::F16, s.m * s.n, Role::Output}};
}


// A GEMV/GEMM launch plan: `main` (kernel, grid, block, smem already set) over the AWQ buffers, an fp32
// workspace, and for split > 1 the reduction of the per-split partials into y.
LaunchPlan matmul_plan(const Mnkg& s, Launch main, int64_t split) {
  LaunchPlan plan;
  plan.buffers = awq_buffers(s);
  plan.buffers.push_back({"ws", DType::F32, split > 1 ? split * s.m * s.n : 1, Role::Workspace});
  main.args = {KernelArg::buf("x"),      KernelArg::buf("qweight"), KernelArg::buf("qzeros"), KernelArg::buf("scales"),
               KernelArg::buf("y"),      KernelArg::buf("ws"),      KernelArg::i32(s.m),      KernelArg::i32(s.n),
               KernelArg::i32(s.k),      KernelArg::i32(s.group)};
  plan.launches.push_back(main);
  if (split > 1) plan.launches.push_back(splitk_reduce_launch(s.m * s.n, split));
  return plan;
}

std::string gemv_kernel(const Point& p) { return name_expr("awq_gemv_kernel", {p.at("warps"), p.at("vec"), p.at("mt")}); }
std::string gemm_kernel(const Point& p) {
  return name_expr("awq_gemm_kernel", {p.at("bm"), p.at("bn"), p.at("bk"), p.at("warps"), p.at("stages")});
}

KernelFamily make_dequant() {
  KernelFamily f;
  f.name = "awq_dequant";
  f.op = "dequant";
  f.weight_types = {WeightType::AWQ_INT4};
  f.dtypes = linear_dtypes(WeightType::AWQ_INT4, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "awq/awq_dequant.cuh";
  f.summary = "AWQ INT4 -> fp16 W[K][N] (cuBLAS path, pre-dequantized weights)";
  f.min_sm = 75;
  f.params = {{"threads", {64, 128, 256, 512}, 256, "threads per block"},
              {"words", {1, 2, 4}, 2, "packed words (8 weights each) per thread"}};
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    std::string e = common_shape_check(s);
    if (e.empty() && (s.n / 8) % p.at("words")) e = "N/8 must be a multiple of words";
    return e;
  };
  f.kernels = [](const Point& p) {
    return std::vector<std::string>{name_expr("awq_dequant_kernel", {p.at("threads"), p.at("words")})};
  };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    LaunchPlan plan;
    plan.buffers = {{"qweight", DType::I32, s.k * s.n / 8, Role::Input},
                    {"qzeros", DType::I32, s.k / s.group * s.n / 8, Role::Input},
                    {"scales", DType::F16, s.k / s.group * s.n, Role::Input},
                    {"w", DType::F16, s.k * s.n, Role::Output}};
    Launch l;
    l.kernel = name_expr("awq_dequant_kernel", {p.at("threads"), p.at("words")});
    l.grid.x = static_cast<uint32_t>(cdiv(s.k * s.n / 8, p.at("threads") * p.at("words")));
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    l.args = {KernelArg::buf("qweight"), KernelArg::buf("qzeros"), KernelArg::buf("scales"), KernelArg::buf("w"),
              KernelArg::i32(s.k),       KernelArg::i32(s.n),      KernelArg::i32(s.group)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = awq_inputs;
  f.probe_shape = Shape{kDims, {8, 1024, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 64, 4096, 128}, "Qwen3-8B wq, N cut to 64"},
                   Shape{kDims, {1, 80, 96, 32}, "odd: 10 words per row, 3 groups"},
                   Shape{kDims, {1, 1024, 128, 128}, "wk rows, K cut to one group"}};
  f.reference = [](const Shape& shape, const HostBuffers& in) {
    const Mnkg s = mnkg(shape);
    Expected e;
    e.buffer = "w";
    e.values = reference_dequant(data_from(s, in));
    return std::vector<Expected>{e};  // bit-exact: (q - z) * s is exact in fp32, one fp16 rounding
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) {
    return quantized_layer_shapes(c, w, WeightType::AWQ_INT4, 1);
  };
  return f;
}

KernelFamily make_gemv() {
  KernelFamily f;
  f.name = "awq_gemv";
  f.op = "linear";
  f.weight_types = {WeightType::AWQ_INT4};
  f.dtypes = linear_dtypes(WeightType::AWQ_INT4, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "awq/awq_gemv.cuh";
  f.summary = "decode GEMV, M = 1..8: warps split K, lanes own packed columns, split-k over blocks";
  f.min_sm = 75;
  f.params = {{"warps", {2, 4, 8}, 4, "warps per block, each takes every warps-th row of K"},
              {"vec", {1, 2, 4}, 1, "packed words per lane and row (vector width of the weight load)"},
              {"mt", {1, 2, 4, 8}, 1, "rows of M per block"},
              {"split_k", {1, 2, 4, 8, 16}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"warps", 4}, {"vec", 1}, {"mt", 1}, {"split_k", 1}},
                {{"warps", 4}, {"vec", 2}, {"mt", 4}, {"split_k", 4}},
                {{"warps", 8}, {"vec", 1}, {"mt", 8}, {"split_k", 2}}};
  f.point_constraint = [](const Point& p) {
    if (p.at("mt") * p.at("vec") * 8 > 128) return std::string("more than 128 fp32 accumulators per thread");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    std::string e = common_shape_check(s);
    if (!e.empty()) return e;
    if (s.m > 8) return std::string("GEMV serves M <= 8");
    if ((s.n / 8) % p.at("vec")) return std::string("N/8 must be a multiple of vec");
    if (p.at("split_k") > s.k / s.group) return std::string("split_k exceeds the number of groups along K");
    return std::string();
  };
  // One step's loads in flight a warp: each lane's VEC weight words of one k. The next step's loads wait behind
  // the branch on a group change (NVVM unrolls the loop at most twice and loads nothing across that branch), so
  // no ring keeps more (the generic 1 KB a warp put the H200's rows at 4-7x their measured times).
  f.bytes_in_flight_per_warp = [](const Point& p) { return p.at("vec") * 4 * 32; };
  f.kernels = [](const Point& p) { return with_splitk_reduce({gemv_kernel(p)}, p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    Launch l;
    l.kernel = gemv_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(s.n / 8, 32 * p.at("vec")));
    l.grid.y = static_cast<uint32_t>(cdiv(s.m, p.at("mt")));
    l.grid.z = static_cast<uint32_t>(p.at("split_k"));
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    return matmul_plan(s, l, p.at("split_k"));
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = awq_inputs;
  f.probe_shape = Shape{kDims, {8, 1024, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 64, 4096, 128}, "Qwen3-8B wq decode, N cut to 64"},
                   Shape{kDims, {1, 64, 12288, 128}, "Qwen3-8B down_proj decode, N cut to 64"},
                   Shape{kDims, {5, 208, 160, 32}, "odd: M=5, 26 words, 5 groups of 32"},
                   Shape{kDims, {8, 576, 256, 64}, "M=8, N spans 3 blocks at vec=1"}};
  set_linear_reference(f, gemm_operands, gemm_expected);
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) {
    return quantized_layer_shapes(c, w, WeightType::AWQ_INT4, 1);
  };
  return f;
}

KernelFamily make_gemm() {
  KernelFamily f;
  f.name = "awq_gemm";
  f.op = "linear";
  f.weight_types = {WeightType::AWQ_INT4};
  f.dtypes = linear_dtypes(WeightType::AWQ_INT4, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "awq/awq_gemm.cuh";
  f.summary = "prefill tensor-core GEMM: cp.async pipeline, LOP3 INT4->FP16, ldmatrix + mma.m16n8k16 (f32)";
  f.min_sm = 80;
  f.params = {{"bm", {16, 32, 64}, 32, "tile rows (M)"},
              {"bn", {64, 128}, 64, "tile columns (N)"},
              {"bk", {32, 64}, 32, "tile depth (K)"},
              {"warps", {2, 4, 8}, 4, "warps per block, side by side along N"},
              {"stages", {2, 3, 4}, 3, "cp.async pipeline stages"},
              {"split_k", {1, 2, 4, 8}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"bm", 16}, {"bn", 64}, {"bk", 32}, {"warps", 2}, {"stages", 2}, {"split_k", 1}},
                {{"bm", 32}, {"bn", 64}, {"bk", 32}, {"warps", 4}, {"stages", 3}, {"split_k", 2}},
                {{"bm", 64}, {"bn", 128}, {"bk", 64}, {"warps", 4}, {"stages", 4}, {"split_k", 1}}};
  f.point_constraint = [](const Point& p) {
    const int64_t nf = p.at("bn") / (8 * p.at("warps"));
    if (nf < 1) return std::string("fewer than 8 columns per warp");
    if (p.at("bm") / 16 * nf * 4 > 128) return std::string("more than 128 fp32 accumulators per thread");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    std::string e = common_shape_check(s);
    if (!e.empty()) return e;
    if (s.n % p.at("bn")) return "N must be a multiple of bn=" + std::to_string(p.at("bn"));
    if (s.group % p.at("bk")) return "the group size must be a multiple of bk=" + std::to_string(p.at("bk"));
    if (p.at("split_k") > s.k / p.at("bk")) return std::string("split_k exceeds the number of K tiles");
    return std::string();
  };
  f.kernels = [](const Point& p) { return with_splitk_reduce({gemm_kernel(p)}, p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    Launch l;
    l.kernel = gemm_kernel(p);
    l.grid.x = static_cast<uint32_t>(s.n / p.at("bn"));
    l.grid.y = static_cast<uint32_t>(cdiv(s.m, p.at("bm")));
    l.grid.z = static_cast<uint32_t>(p.at("split_k"));
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    l.dynamic_smem = gemm_smem_bytes(p);
    return matmul_plan(s, l, p.at("split_k"));
  };
  set_tiled_bytes_reread(f);
  set_tiled_main_loop(f);
  f.make_inputs = awq_inputs;
  f.probe_shape = Shape{kDims, {8, 1024, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kDims, {17, 128, 4096, 128}, "Qwen3-8B wq prefill: M=17, N cut to 128"},
                   Shape{kDims, {3, 128, 256, 64}, "odd: M=3, 4 groups of 64"},
                   Shape{kDims, {70, 256, 384, 128}, "M=70: tails in every M tile size"}};
  set_linear_reference(f, gemm_operands, gemm_expected);
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) {
    return quantized_layer_shapes(c, w, WeightType::AWQ_INT4, 256);
  };
  return f;
}

}  // namespace

int64_t gemm_smem_bytes(const Point& p) {
  const int64_t bm = p.at("bm"), bn = p.at("bn"), bk = p.at("bk"), stages = p.at("stages");
  // Per stage: A tile (rows padded by 8 halves against ldmatrix bank conflicts), packed B, one row of
  // scales and of packed zeros. Plus one dequantized fp16 B tile shared by all stages.
  const int64_t stage = bm * (bk + 8) * 2 + bk * bn / 2 + bn * 2 + bn / 2;
  return stages * stage + bk * (bn + 8) * 2;
}

std::vector<Shape> quantized_layer_shapes(const ModelConfig& c, const ModelWeights* w, WeightType t, int64_t m) {
  // With only a config, the decoder's projections (an AutoAWQ file keeps its lm_head and router fp16) in the
  // config's group.
  return linear_family_shapes(
      c, w, m,
      [t](const LinearShape& l) { return l.type ? *l.type == t : l.label != "lm_head" && l.label != "router"; },
      [&](const LinearShape& l) { return l.type ? l.group : c.group_size > 0 ? int64_t(c.group_size) : int64_t(128); });
}

std::vector<Shape> awq_layer_shapes(const ModelConfig& c, int64_t m) {
  return quantized_layer_shapes(c, nullptr, WeightType::AWQ_INT4, m);
}

const KernelFamily& dequant_family() {
  static const KernelFamily f = make_dequant();
  return f;
}
const KernelFamily& gemv_family() {
  static const KernelFamily f = make_gemv();
  return f;
}
const KernelFamily& gemm_family() {
  static const KernelFamily f = make_gemm();
  return f;
}

}  // namespace qt::kernels::awq
