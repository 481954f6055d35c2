#include "kernels_src/q8_0/q8_family.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "common/half.h"
#include "kernels_src/q8_0/q8_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::q8_0 {
namespace {

using Role = BufferSpec::Role;

struct Mnkg {
  int64_t m, n, k, group;
};
Mnkg mnkg(const Shape& s) { return {s["M"], s["N"], s["K"], s["G"]}; }
const std::vector<std::string> kDims = {"M", "N", "K", "G"};


constexpr int64_t kQuantizeWarps = 4;
const std::string kQuantize = "q8_quantize_act_kernel<4>";


std::string common_shape_check(const Mnkg& s) {
  if (s.m < 1 || s.n < 1 || s.k < 1 || s.group < 1) return "M, N, K and G must be positive";
  if (s.k % s.group) return "K must be a multiple of the group size G";
  // Kernel arguments are int32; the split-k workspace and the activation copy index M*N and M*K with an int.
  constexpr int64_t kMaxI32 = INT32_MAX;
  if (s.m > kMaxI32 / s.n || s.m > kMaxI32 / s.k || s.n > kMaxI32 / s.k)
    return "M*N, M*K and N*K must stay below 2^31 (32-bit kernel indexing)";
  return "";
}

HostBuffers q8_inputs(const Shape& shape, uint64_t seed) {
  const Mnkg s = mnkg(shape);
  const Q8Data d = make_q8_data(s.m, s.n, s.k, s.group, seed);
  return {{"x", bytes_of(d.x)}, {"q", bytes_of(d.q)}, {"scales", bytes_of(d.scales)}};
}

Q8Data data_from(const Mnkg& s, const HostBuffers& in) {
  Q8Data d;
  d.m = s.m, d.n = s.n, d.k = s.k, d.group = s.group;
  d.x = from_bytes<uint16_t>(in.at("x"));
  d.q = from_bytes<int8_t>(in.at("q"));
  d.scales = from_bytes<float>(in.at("scales"));
  return d;
}

// The product's operands: x as fp16 values, w = q * scale (fp32, as models' dequant_element gives it),
// transposed to [K][N]; for the GEMM also the per-group amax of x, whose product with |w| bounds the effect of
// quantizing x to int8.
LinearOperands operands(const Shape& shape, const HostBuffers& in, bool with_group_amax) {
  const Mnkg s = mnkg(shape);
  const Q8Data d = data_from(s, in);
  LinearOperands ops;
  ops.m = s.m, ops.n = s.n, ops.k = s.k;
  ops.a.resize(d.x.size());
  for (size_t i = 0; i < d.x.size(); ++i) ops.a[i] = half_bits_to_float(d.x[i]);
  ops.w.resize(size_t(s.k * s.n));
  for (int64_t nn = 0; nn < s.n; ++nn)
    for (int64_t kk = 0; kk < s.k; ++kk) {
      const size_t i = size_t(nn * s.k + kk);
      ops.w[size_t(kk * s.n + nn)] = float(d.q[i]) * d.scales[i / size_t(s.group)];
    }
  if (with_group_amax) {
    ops.g.resize(ops.a.size());
    for (size_t g0 = 0; g0 < ops.a.size(); g0 += size_t(s.group)) {
      float amax = 0.0f;
      for (size_t i = g0; i < g0 + size_t(s.group); ++i) amax = std::max(amax, std::fabs(ops.a[i]));
      std::fill(ops.g.begin() + ptrdiff_t(g0), ops.g.begin() + ptrdiff_t(g0 + size_t(s.group)), amax);
    }
  }
  return ops;
}

// fp32 summation in any order, with at most K/8 + 64 roundings along any path of its tree (the GEMV's per-lane
// vector dot, K steps of 32 vectors, 5 shuffle levels and the split-k sum; the GEMM's K/16 mma steps and
// tile folds), each within 2^-24 of a partial sum bounded by sum |x * w|.
double accumulation_bound(double abs_xw, int64_t k) { return double(k / 8 + 64) * std::ldexp(1.0, -24) * abs_xw; }

Expected expected_y(const LinearSums& sums, double abs_tol) {
  Expected e;
  e.buffer = "y";
  e.values = sums.y;
  e.abs_tol = abs_tol + std::ldexp(1.0, -24);  // fp16 output: subnormal spacing near zero
  e.rel_tol = std::ldexp(1.0, -10);            // fp16 output rounding (2^-11) with slack for the fp32 sum
  return e;
}

// GEMV: weights and activations enter exactly (q and x widen to fp32 without loss, one fp32 product per
// vector scale), so only the fp32 summation separates the kernel from the exact result.
std::vector<Expected> gemv_expected(const Shape& shape, const HostBuffers&, const LinearSums& sums) {
  return {expected_y(sums, accumulation_bound(max_of(sums.abs), shape["K"]))};
}

// GEMM: the reference does not know the point, so its tolerance covers both `act` variants:
//   act 0: each weight is rounded once to fp16, |w - fp16(w)| <= 2^-11 |w| + 2^-25 (subnormal half spacing):
//          at most 2^-11 sum |x w| + 2^-25 sum |x| per output;
//   act 1: each activation moves by at most half a quantization step, amax_g / 254 (plus 2^-20 amax_g for the
//          fp32 rounding of 127/amax and amax/127): at most (1/254 + 2^-20) sum_g amax_g sum_{k in g} |w|.
// The int8 products and their s32 sums are exact; the fp32 terms are the summation bound above. The largest
// bound over all outputs is the buffer's absolute tolerance (the comparison has one per buffer), which makes
// this check loose for act 0 on outputs far from the largest; tests/nvrtc/test_q8_0_emu.cpp holds each
// variant to its own per-output bound.
std::vector<Expected> gemm_expected(const Shape& shape, const HostBuffers& in, const LinearSums& sums) {
  const Mnkg s = mnkg(shape);
  const std::vector<uint16_t> x = from_bytes<uint16_t>(in.at("x"));
  double tol = 0;
  for (int64_t mm = 0; mm < s.m; ++mm) {
    double abs_x = 0;
    for (int64_t kk = 0; kk < s.k; ++kk) abs_x += std::fabs(half_bits_to_float(x[size_t(mm * s.k + kk)]));
    for (int64_t nn = 0; nn < s.n; ++nn) {
      const size_t o = size_t(mm * s.n + nn);
      const double weights = std::ldexp(1.0, -11) * sums.abs[o] + std::ldexp(1.0, -25) * abs_x;
      const double acts = (1.0 / 254.0 + std::ldexp(1.0, -20)) * sums.g_abs[o];
      tol = std::max(tol, accumulation_bound(sums.abs[o], s.k) + std::max(weights, acts));
    }
  }
  return {expected_y(sums, tol)};
}

std::vector<BufferSpec> q8_buffers(const Mnkg& s) {
  return {{"x", DType::F16, s.m * s.k, Role::Input},
          {"q", DType::I8, s.n * s.k, Role::Input},
          {"scales", DType::F32, s.n * s.k / s.group, Role::Input},
          {"y", DType::F16, s.m * s.n, Role::Output}};
}

// ---- q8_0_dequant ----

const std::vector<std::string> kDequantDims = {"N", "K", "G"};

std::string dequant_kernel(const Point& p) { return name_expr("q8_dequant_kernel", {p.at("threads"), p.at("vec")}); }

KernelFamily make_dequant() {
  KernelFamily f;
  f.name = "q8_0_dequant";
  f.op = "dequant";
  f.weight_types = {WeightType::Q8_0};
  f.dtypes = linear_dtypes(WeightType::Q8_0, DType::F16, DType::F16);
  f.dims = kDequantDims;
  f.source_hash = kFamilySourceHash;
  f.source = "q8_0/q8_dequant.cuh";
  f.summary = "Q8_0 -> fp16 W[N][K] (the dequant + cuBLASLt path)";
  f.min_sm = 80;  // cvt.rn.f16x2.f32
  f.params = {{"threads", {64, 128, 256, 512}, 256, "threads per block"},
              {"vec", {8, 16}, 8, "codes per thread (one load, vec / 8 16-byte stores)"}};
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    std::string e = common_shape_check({1, shape["N"], shape["K"], shape["G"]});
    if (e.empty() && shape["N"] * shape["K"] % p.at("vec")) e = "N*K must be a multiple of vec=" + std::to_string(p.at("vec"));
    return e;
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{dequant_kernel(p)}; };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnkg s{1, shape["N"], shape["K"], shape["G"]};
    LaunchPlan plan;
    plan.buffers = {{"q", DType::I8, s.n * s.k, Role::Input},
                    {"scales", DType::F32, s.n * s.k / s.group, Role::Input},
                    {"w", DType::F16, s.n * s.k, Role::Output}};
    Launch l;
    l.kernel = dequant_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(s.n * s.k, p.at("threads") * p.at("vec")));
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    l.args = {KernelArg::buf("q"), KernelArg::buf("scales"), KernelArg::buf("w"), KernelArg::i32(s.n),
              KernelArg::i32(s.k), KernelArg::i32(s.group)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [](const Shape& shape, uint64_t seed) {
    const Q8Data d = make_q8_data(1, shape["N"], shape["K"], shape["G"], seed);
    return HostBuffers{{"q", bytes_of(d.q)}, {"scales", bytes_of(d.scales)}};
  };
  f.reference = [](const Shape& shape, const HostBuffers& in) {
    const std::vector<int8_t> q = from_bytes<int8_t>(in.at("q"));
    const std::vector<float> scales = from_bytes<float>(in.at("scales"));
    const size_t group = size_t(shape["G"]);
    Expected e;
    e.buffer = "w";
    e.values.resize(q.size());
    for (size_t i = 0; i < q.size(); ++i) e.values[i] = round_to_half(float(q[i]) * scales[i / group]);
    return std::vector<Expected>{e};  // bit-exact: one fp32 product, one fp16 rounding
  };
  f.probe_shape = Shape{kDequantDims, {1024, 4096, 32}, "probe"};
  f.test_shapes = {Shape{kDequantDims, {48, 4096, 32}, "Qwen3-8B wq, N cut to 48"},
                   Shape{kDequantDims, {5, 160, 10}, "odd: N=5, groups of 10 that end inside a 4-code run"},
                   Shape{kDequantDims, {24, 768, 16}, "G=16: two groups per 16-code vector"}};
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) {
    std::vector<Shape> out;
    for (const Shape& s : q8_layer_shapes(c, w, 1)) out.push_back(Shape{kDequantDims, {s["N"], s["K"], s["G"]}, s.label});
    return out;
  };
  return f;
}

// ---- q8_0_gemv ----

std::string gemv_kernel(const Point& p) {
  return name_expr("q8_gemv_kernel", {p.at("warps"), p.at("rows"), p.at("vec"), p.at("mt")});
}

KernelFamily make_gemv() {
  KernelFamily f;
  f.name = "q8_0_gemv";
  f.op = "linear";
  f.weight_types = {WeightType::Q8_0};
  f.dtypes = linear_dtypes(WeightType::Q8_0, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "q8_0/q8_gemv.cuh";
  f.summary = "decode GEMV, M = 1..8: warps own output rows, lanes stream K in int8 vectors, split-k over blocks";
  f.min_sm = 80;
  f.params = {{"warps", {2, 4, 8}, 4, "warps per block"},
              {"rows", {1, 2, 4}, 2, "output rows per warp (independent weight streams per lane)"},
              {"vec", {4, 8, 16}, 16, "int8 weights per lane and load (vector width)"},
              {"mt", {1, 2, 4, 8}, 1, "rows of M per block"},
              {"split_k", {1, 2, 4, 8}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"warps", 4}, {"rows", 2}, {"vec", 16}, {"mt", 1}, {"split_k", 1}},
                {{"warps", 4}, {"rows", 1}, {"vec", 16}, {"mt", 4}, {"split_k", 4}},
                {{"warps", 8}, {"rows", 2}, {"vec", 8}, {"mt", 8}, {"split_k", 2}}};
  f.point_constraint = [](const Point& p) {
    if (p.at("mt") * p.at("vec") > 64)
      return std::string("more than 32 packed activation words per thread (mt*vec > 64)");
    if (p.at("mt") * p.at("rows") > 16) return std::string("more than 16 accumulators per thread (mt*rows > 16)");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    std::string e = common_shape_check(s);
    if (!e.empty()) return e;
    if (s.m > 8) return std::string("GEMV serves M <= 8");
    const int64_t vec = p.at("vec");
    if (s.group % vec) return "the group size must be a multiple of vec=" + std::to_string(vec);
    if (p.at("split_k") > s.k / vec) return std::string("split_k exceeds the number of vectors along K");
    return std::string();
  };
  f.kernels = [](const Point& p) { return with_splitk_reduce({gemv_kernel(p)}, p.at("split_k")); };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    const int64_t split = p.at("split_k");
    LaunchPlan plan;
    plan.buffers = q8_buffers(s);
    plan.buffers.push_back({"ws", DType::F32, split > 1 ? split * s.m * s.n : 1, Role::Workspace});
    Launch l;
    l.kernel = gemv_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(s.n, p.at("warps") * p.at("rows")));
    l.grid.y = static_cast<uint32_t>(cdiv(s.m, p.at("mt")));
    l.grid.z = static_cast<uint32_t>(split);
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    l.args = {KernelArg::buf("x"), KernelArg::buf("q"),   KernelArg::buf("scales"), KernelArg::buf("y"),
              KernelArg::buf("ws"), KernelArg::i32(s.m), KernelArg::i32(s.n),      KernelArg::i32(s.k),
              KernelArg::i32(s.group)};
    plan.launches.push_back(l);
    if (split > 1) plan.launches.push_back(splitk_reduce_launch(s.m * s.n, split));
    return plan;
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = q8_inputs;
  f.probe_shape = Shape{kDims, {8, 1024, 4096, 64}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 48, 4096, 64}, "Qwen3-8B wq decode, N cut to 48"},
                   Shape{kDims, {5, 40, 160, 32}, "odd: M=5, N=40 (a partial block), K=160 (idle lanes), G=32"},
                   Shape{kDims, {8, 24, 768, 16}, "M=8, G=16"},
                   Shape{kDims, {2, 17, 1024, 64}, "N=17: rows past N in a warp"}};
  set_linear_reference(
      f, [](const Shape& shape, const HostBuffers& in) { return operands(shape, in, false); }, gemv_expected);
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) { return q8_layer_shapes(c, w, 1); };
  return f;
}

// ---- q8_0_gemm ----

std::string gemm_kernel(const Point& p) {
  return name_expr("q8_gemm_kernel", {p.at("bm"), p.at("bn"), p.at("bk"), p.at("warps"), p.at("stages"), p.at("act")});
}

KernelFamily make_gemm() {
  KernelFamily f;
  f.name = "q8_0_gemm";
  f.op = "linear";
  f.weight_types = {WeightType::Q8_0};
  f.dtypes = linear_dtypes(WeightType::Q8_0, DType::F16, DType::F16);
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "q8_0/q8_gemm.cuh";
  f.summary = "tensor-core GEMM: cp.async pipeline, ldmatrix; int8 tile -> fp16 mma.m16n8k16 (act=0) or "
              "int8 activations with mma.m16n8k32 s8 (act=1)";
  f.min_sm = 80;
  f.params = {{"bm", {16, 32, 64}, 32, "tile rows (M)"},
              {"bn", {64, 128}, 64, "tile columns (N)"},
              {"bk", {32, 64}, 64, "tile depth (K); the group size must be a multiple"},
              {"warps", {2, 4, 8}, 4, "warps per block, side by side along N"},
              {"stages", {2, 3, 4}, 3, "cp.async pipeline stages"},
              {"act", {0, 1}, 0, "0: dequantize weights to fp16 (mma f16); 1: quantize activations to int8 (mma s8)"},
              {"split_k", {1, 2}, 1, "blocks along K (fp32 workspace + reduction when > 1)"}};
  f.defaults = {{{"bm", 16}, {"bn", 64}, {"bk", 32}, {"warps", 2}, {"stages", 2}, {"act", 0}, {"split_k", 2}},
                {{"bm", 32}, {"bn", 64}, {"bk", 64}, {"warps", 4}, {"stages", 3}, {"act", 0}, {"split_k", 1}},
                {{"bm", 64}, {"bn", 128}, {"bk", 64}, {"warps", 4}, {"stages", 3}, {"act", 1}, {"split_k", 1}},
                {{"bm", 32}, {"bn", 64}, {"bk", 32}, {"warps", 2}, {"stages", 4}, {"act", 1}, {"split_k", 2}}};
  f.point_constraint = [](const Point& p) {
    const int64_t nf = p.at("bn") / (8 * p.at("warps"));
    if (nf < 1) return std::string("fewer than 8 columns per warp");
    // act 1 keeps an int32 partial per fp32 accumulator.
    if (p.at("bm") / 16 * nf * 4 * (p.at("act") ? 2 : 1) > 128)
      return std::string("more than 128 accumulator registers per thread");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    std::string e = common_shape_check(s);
    if (!e.empty()) return e;
    if (s.group % p.at("bk")) return "the group size must be a multiple of bk=" + std::to_string(p.at("bk"));
    if (p.at("split_k") > s.k / p.at("bk")) return std::string("split_k exceeds the number of K tiles");
    return std::string();
  };
  f.kernels = [](const Point& p) {
    std::vector<std::string> k = {gemm_kernel(p)};
    if (p.at("act")) k.push_back(kQuantize);
    return with_splitk_reduce(k, p.at("split_k"));
  };
  f.plan = [](const Point& p, const Shape& shape) {
    const Mnkg s = mnkg(shape);
    const int64_t split = p.at("split_k");
    const bool act = p.at("act") != 0;
    LaunchPlan plan;
    plan.buffers = q8_buffers(s);
    plan.buffers.push_back({"ws", DType::F32, split > 1 ? split * s.m * s.n : 1, Role::Workspace});
    plan.buffers.push_back({"xq", DType::I8, act ? s.m * s.k : 16, Role::Workspace});
    plan.buffers.push_back({"xs", DType::F32, act ? s.m * s.k / s.group : 1, Role::Workspace});
    if (act) {
      Launch qz;
      qz.kernel = kQuantize;
      qz.grid.x = static_cast<uint32_t>(cdiv(s.m * s.k / s.group, kQuantizeWarps));
      qz.block.x = static_cast<uint32_t>(32 * kQuantizeWarps);
      qz.args = {KernelArg::buf("x"), KernelArg::buf("xq"), KernelArg::buf("xs"),
                 KernelArg::i32(s.m * s.k / s.group), KernelArg::i32(s.group)};
      plan.launches.push_back(qz);
    }
    Launch l;
    l.kernel = gemm_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(s.n, p.at("bn")));
    l.grid.y = static_cast<uint32_t>(cdiv(s.m, p.at("bm")));
    l.grid.z = static_cast<uint32_t>(split);
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    l.dynamic_smem = gemm_smem_bytes(p);
    l.args = {KernelArg::buf(act ? "xq" : "x"), KernelArg::buf("q"),  KernelArg::buf("scales"), KernelArg::buf("xs"),
              KernelArg::buf("y"),              KernelArg::buf("ws"), KernelArg::i32(s.m),      KernelArg::i32(s.n),
              KernelArg::i32(s.k),              KernelArg::i32(s.group)};
    plan.launches.push_back(l);
    if (split > 1) plan.launches.push_back(splitk_reduce_launch(s.m * s.n, split));
    return plan;
  };
  set_tiled_bytes_reread(f);
  set_tiled_main_loop(f);
  f.make_inputs = q8_inputs;
  f.probe_shape = Shape{kDims, {64, 1024, 4096, 64}, "probe"};
  f.test_shapes = {Shape{kDims, {17, 128, 1024, 64}, "Qwen3-0.6B wq prefill: M=17, N cut to 128"},
                   Shape{kDims, {3, 72, 192, 64}, "odd: M=3, N=72 (a partial N tile), 3 groups"},
                   Shape{kDims, {70, 160, 160, 32}, "M=70: tails in every M tile; N=160, G=32"},
                   Shape{kDims, {5, 37, 256, 128}, "odd N=37 (scalar stores), G=128"},
                   Shape{kDims, {1, 64, 128, 64}, "M=1: one row in the tile"}};
  set_linear_reference(
      f, [](const Shape& shape, const HostBuffers& in) { return operands(shape, in, true); }, gemm_expected);
  f.model_shapes = [](const ModelConfig& c, const ModelWeights* w) { return q8_layer_shapes(c, w, 256); };
  return f;
}

}  // namespace

int64_t gemm_smem_bytes(const Point& p) {
  const int64_t bm = p.at("bm"), bn = p.at("bn"), bk = p.at("bk"), stages = p.at("stages");
  const bool act = p.at("act") != 0;
  // Mirrors Q8GemmTile in q8_gemm.cuh: int8 rows padded to an odd number of 16-byte units, fp16 rows by 16 bytes.
  const int64_t pad8 = (bk / 16) % 2 == 0 ? 16 : 32;
  const int64_t a = bm * (act ? bk + pad8 : 2 * bk + 16);
  const int64_t stage = a + bn * (bk + pad8) + bn * 4 + (act ? bm * 4 : 0);
  return stages * stage + (act ? 0 : bn * (2 * bk + 16));
}

std::vector<Shape> q8_layer_shapes(const ModelConfig& c, const ModelWeights* w, int64_t m) {
  // Without weights every linear layer counts (and the lm_head, Q8_0 in qwen3.c files) in the config's group;
  // with weights, the Q8_0 tensors in their own group.
  const int64_t config_group = c.group_size > 0 ? c.group_size : default_group_dividing(WeightType::Q8_0, {c.dim});
  return linear_family_shapes(
      c, w, m, [](const LinearShape& l) { return !l.type || *l.type == WeightType::Q8_0; },
      [&](const LinearShape& l) { return l.type ? l.group : config_group; });
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

}  // namespace qt::kernels::q8_0
