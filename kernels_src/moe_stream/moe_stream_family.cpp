// moe_gate_up_gemv.frag.<type> and moe_down_residual_gemv.frag.<type>: a MoE block's experts at decode as the
// streaming GEMV runs them (frag_stream_gemv.cuh, ROUTE), from the router's logits, one launch each. Their
// references are the gating's (moe_reference.h) followed by the grouped moe_gate_up.frag's, or by the grouped
// moe_down.frag's, moe_finalize's weighted sum and the residual add: the grouped families' inputs (experts in the
// frag layout, one after another) with logits whose top-k are the ids. Their schedules are the dense streaming
// GEMVs' (kw warps on a K range each, pf tiles in flight, split K reduced by the last block to arrive), so their
// parameters and register limits are those families'.
#include "kernels_src/moe_stream/moe_stream_family.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "common/error.h"
#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/moe/moe_reference.h"
#include "kernels_src/moe_wgmma/moe_wgmma_family.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::moe_stream {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"T", "E", "TOPK", "N", "K", "G", "R"};  // R: renormalized top-k weights

// The grouped families' shape: the same without R.
Shape grouped_shape(const Shape& s) {
  return Shape{{"T", "E", "TOPK", "N", "K", "G"}, {s["T"], s["E"], s["TOPK"], s["N"], s["K"], s["G"]}, s.label};
}
// Experts per lane of the top-k warp: the fewest that hold E (moe_topk.cuh).
int64_t epl_for(int64_t experts) {
  int64_t epl = 1;
  while (32 * epl < experts) epl *= 2;
  return epl;
}
constexpr int64_t kMaxEpl = 8;

struct Format {
  std::string name;  // family suffix, as the grouped families'
  WeightType type;
  const KernelFamily& (*stream)();   // the dense streaming GEMV of the type: the down family's schedule
  const KernelFamily& (*gate_up)();  // the dense gate|up streaming GEMV: the gate|up family's schedule
};
const std::vector<Format>& formats() {
  static const std::vector<Format> f = {
      {"awq_int4", WeightType::AWQ_INT4, &frag::awq_stream_gemv_family, &frag::awq_gate_up_family},
      {"int8_sym", WeightType::INT8_GW_SYM, &frag::int8_stream_gemv_family, &frag::int8_gate_up_family},
      {"q8_0", WeightType::Q8_0, &frag::q8_0_stream_gemv_family, &frag::q8_0_gate_up_family}};
  return f;
}

const KernelFamily& grouped(const Format& fmt, bool gate_up) {
  const std::string name = std::string(gate_up ? "moe_gate_up" : "moe_down") + ".frag." + fmt.name;
  for (const KernelFamily* f : moe_wgmma::families())
    if (f->name == name) return *f;
  throw Error("moe_stream: no grouped family " + name, kExitFailure);
}

frag::FragDims dims_of(const Format& fmt, const Shape& s) {
  return {s["N"], s["K"], s["G"], frag::frag_layout_bits(fmt.type)};
}

// `ring`: the kernel's RING value (frag::stream_ring_kernel).
std::string kernel(const Format& fmt, bool gate_up, const Point& p, int64_t ring) {
  using frag::StreamFuse, frag::StreamRoute;
  const int bits = frag::frag_layout_bits(fmt.type);
  if (gate_up)
    return frag::stream_gemv_kernel(bits, p.at("kw"), p.at("pf"), 2, true, StreamFuse::kNone, StreamRoute::kRows,
                                    p.at("epl"), ring);
  return frag::stream_gemv_kernel(bits, p.at("kw"), p.at("pf"), p.at("tn"), false, StreamFuse::kResidual,
                                  StreamRoute::kCombine, p.at("epl"), ring);
}

std::string shape_check(const Format& fmt, bool gate_up, const Point& p, const Shape& s) {
  for (const char* d : {"T", "E", "TOPK", "N", "K", "G"})
    if (s[d] < 1) return std::string("T, E, TOPK, N, K and G must be positive");
  if (s["TOPK"] > s["E"]) return std::string("TOPK exceeds E");
  if (s["TOPK"] > 32) return std::string("TOPK exceeds the top-k warp's 32 lanes");
  if (s["E"] > 32 * kMaxEpl) return "E exceeds " + std::to_string(32 * kMaxEpl) + " (the top-k warp's experts)";
  if (s["E"] > 32 * p.at("epl")) return "E exceeds 32 * epl = " + std::to_string(32 * p.at("epl"));
  if (s["T"] > kMaxTokens) return "the routed GEMV serves decode, T <= " + std::to_string(kMaxTokens);
  const frag::FragDims d = dims_of(fmt, s);
  if (std::string e = frag::frag_dims_check(d); !e.empty()) return e;
  if (gate_up && d.n % 64) return std::string("N (each projection's columns) must be whole 64-column tiles");
  if (d.weight_words() * s["E"] > INT32_MAX * int64_t{4}) return std::string("experts too large for one array");
  if (std::string e = frag::stream_group_check(p, d.group); !e.empty()) return e;
  if (p.at("split") > d.groups()) return std::string("split exceeds the number of groups along K");
  if (!gate_up && s["TOPK"] * p.at("split") > 65535) return std::string("TOPK x split exceeds the grid's z");
  return std::string();
}

// Router logits [T][E], fp16 in [-4, 4), and the ids and weights the gating picks from them (the reference's,
// under "ids" and "weights").
void add_logits(const Shape& s, uint64_t seed, HostBuffers& in) {
  const int64_t t = s["T"], e = s["E"], k = s["TOPK"];
  Rng rng(seed ^ 0x6c6f6769ull);
  std::vector<uint16_t> logits(static_cast<size_t>(t * e));
  std::vector<float> values(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = float_to_half_bits(float(8.0 * rng.uniform() - 4.0));
    values[i] = half_bits_to_float(logits[i]);
  }
  std::vector<int32_t> ids(static_cast<size_t>(t * k));
  std::vector<float> weights(ids.size());
  moe::gating(values.data(), t, e, k, s["R"] != 0, ids.data(), weights.data());
  in["logits"] = bytes_of(logits);
  in["ids"] = bytes_of(ids);
  in["weights"] = bytes_of(weights);
}

// The down projection's expected y [count][N] combined per token: out[t] = prev[t] + fp16(sum_j w y_i), with
// each y_i's tolerance carried through its weight and y_i's own fp16 rounding (which the kernel makes before
// weighting, as the grouped GEMM stores y) added.
Expected combined(const Expected& y, const Shape& s, const HostBuffers& in) {
  const int64_t t_count = s["T"], k = s["TOPK"], n = s["N"];
  const std::vector<float> w = from_bytes<float>(in.at("weights"));
  Expected out;
  out.buffer = "out";
  double tol = 0;
  for (int64_t t = 0; t < t_count; ++t)
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0, bound = 0;
      for (int64_t j = 0; j < k; ++j) {
        const double v = y.values[size_t((t * k + j) * n + c)], wj = w[size_t(t * k + j)];
        sum += wj * v;
        bound += wj * (y.abs_tol + (y.rel_tol + std::ldexp(1.0, -11)) * std::abs(v));
      }
      out.values.push_back(float(sum));
      tol = std::max(tol, bound);
    }
  out.abs_tol = tol;
  out.rel_tol = std::ldexp(1.0, -10);
  expect_residual_add(out, in.at("out"));
  return out;
}

KernelFamily make(const Format& fmt, bool gate_up) {
  const KernelFamily& base = grouped(fmt, gate_up);
  const KernelFamily& schedule = gate_up ? fmt.gate_up() : fmt.stream();
  const bool zeros = fmt.type == WeightType::AWQ_INT4;
  KernelFamily f;
  f.name = std::string(gate_up ? "moe_gate_up_gemv" : "moe_down_residual_gemv") + ".frag." + fmt.name;
  f.op = gate_up ? kGateUpOp : kDownResidualOp;
  f.weight_types = {fmt.type};
  f.dtypes = base.dtypes;
  f.dims = kDims;
  f.source = "fraglinear/frag_stream_gemv.cuh";
  f.source_hash = kFamilySourceHash;
  f.min_sm = 80;
  f.summary = gate_up ? "decode MoE front, T <= 16: each routed row's gate and up tiles of its expert streamed as "
                        "one GEMV, SwiGLU in the epilogue; no block alignment, no reduction launch"
                      : "decode MoE back, T <= 16: each token's routed rows through their experts' down matrices, "
                        "the last block of a column tile weighting and adding them into the hidden state";
  f.params = schedule.params;
  f.params.push_back({"epl", {1, 2, 4, 8}, 4, "experts per lane of the top-k warp: E <= 32 * epl"});
  f.point_constraint = schedule.point_constraint;
  // Two schedules, so that groups of 32 (pf = 2) have one: K split for enough blocks at one token; each at the
  // experts per lane the shape needs (CI verifies them at 1 and 4). The down GEMV's 8-bit kernel at kw = 4,
  // pf = 4 spills on sm_80-89 (NVRTC 13.0, `qtune static --points all`), so its first default is 8 warps. The
  // first runs the shared ring; its neighbour is the register ring the H200 runs measured.
  const std::vector<Point> base_points =
      gate_up ? std::vector<Point>{{{"kw", 4}, {"pf", 4}, {"split", 2}, {"ring", 1}},
                                   {{"kw", 4}, {"pf", 4}, {"split", 2}, {"ring", 0}},
                                   {{"kw", 4}, {"pf", 2}, {"split", 2}, {"ring", 0}}}
              : std::vector<Point>{{{"kw", 8}, {"pf", 4}, {"split", 1}, {"tn", 1}, {"ring", 1}},
                                   {{"kw", 8}, {"pf", 4}, {"split", 1}, {"tn", 1}, {"ring", 0}},
                                   {{"kw", 4}, {"pf", 2}, {"split", 1}, {"tn", 1}, {"ring", 0}}};
  auto with_epl = [base_points](int64_t epl) {
    std::vector<Point> out = base_points;
    for (Point& p : out) p["epl"] = epl;
    return out;
  };
  f.defaults = with_epl(1);
  for (const Point& p : with_epl(4)) f.defaults.push_back(p);
  f.defaults_for = [with_epl](const Shape& s) { return with_epl(epl_for(s["E"])); };
  f.shape_constraint = [fmt, gate_up](const Point& p, const Shape& s) { return shape_check(fmt, gate_up, p, s); };
  f.bytes_in_flight_per_warp = schedule.bytes_in_flight_per_warp;
  // What a step reads: the routed rows' experts (at most T x TOPK of E), x, and the output; not every expert
  // of the stack that the buffers hold.
  f.bytes_moved = [fmt, gate_up](const Point&, const Shape& s) {
    const frag::FragDims d = dims_of(fmt, s);
    const int64_t count = s["T"] * s["TOPK"], touched = std::min(s["E"], count), mats = gate_up ? 2 : 1;
    const double weights = double(mats * touched) * double(d.weight_words() * 4 + d.scale_halves() * 2 + d.zero_words() * 4);
    const double acts = gate_up ? double(s["T"] * d.k + count * d.n) * 2 : double(count * d.k + 2 * s["T"] * d.n) * 2;
    return weights + acts;
  };
  f.kernels = [fmt, gate_up](const Point& p) {
    return frag::stream_ring_kernel_names(p, [&](int64_t ring) { return kernel(fmt, gate_up, p, ring); });
  };
  f.plan = [fmt, gate_up, zeros](const Point& p, const Shape& s) {
    const frag::FragDims d = dims_of(fmt, s);
    const int64_t t = s["T"], e = s["E"], top_k = s["TOPK"], count = t * top_k, split = p.at("split");
    LaunchPlan plan;
    plan.buffers = {{"x", DType::F16, (gate_up ? t : count) * d.k, Role::Input}, {"logits", DType::F16, t * e, Role::Input}};
    for (const std::string& prefix : gate_up ? std::vector<std::string>{"gate_", "up_"} : std::vector<std::string>{""}) {
      plan.buffers.push_back({prefix + "bq", DType::I32, d.weight_words() * e, Role::Input});
      plan.buffers.push_back({prefix + "bs", DType::F16, d.scale_halves() * e, Role::Input});
      if (zeros) plan.buffers.push_back({prefix + "bz", DType::I32, d.zero_words() * e, Role::Input});
    }
    Launch l;
    l.kernel = kernel(fmt, gate_up, p, frag::stream_ring_kernel(p, s["G"]));
    l.dynamic_smem = frag::stream_ring_smem(frag::frag_layout_bits(fmt.type), p, gate_up ? 2 : p.at("tn"), false);
    l.block.x = uint32_t(32 * p.at("kw"));
    if (gate_up) {
      // Block (gate tile, routed row, split); the kernel's N is the expert's gate and up columns together.
      plan.buffers.push_back({"h", DType::F16, count * d.n, Role::Output});
      plan.buffers.push_back({"ws", DType::F32, split > 1 ? count * split * 2 * d.n : 1, Role::Workspace});
      plan.buffers.push_back({"locks", DType::I32, count * (d.n / 64), Role::InOut});
      l.grid = {uint32_t(d.n / 64), uint32_t(count), uint32_t(split)};
      l.args = {KernelArg::buf("x"),      KernelArg::buf("gate_bq"), KernelArg::buf("gate_bs"),
                zeros ? KernelArg::buf("gate_bz") : KernelArg::null(),
                KernelArg::buf("h"),      KernelArg::buf("ws"),      KernelArg::buf("locks"),
                KernelArg::i32(t),        KernelArg::i32(2 * d.n),   KernelArg::i32(d.k),
                KernelArg::i32(d.group),  KernelArg::null(),         KernelArg::f32(0.0f),
                KernelArg::buf("up_bq"),  KernelArg::buf("up_bs"),   zeros ? KernelArg::buf("up_bz") : KernelArg::null(),
                KernelArg::buf("logits"), KernelArg::i32(e),         KernelArg::i32(top_k),
                KernelArg::i32(s["R"]),   KernelArg::null()};
    } else {
      // Block (column tiles, token, routed row x split); every routed row's partials go through ws.
      const int64_t tiles = cdiv(d.n_tiles(), p.at("tn"));
      plan.buffers.push_back({"out", DType::F16, t * d.n, Role::InOut});
      plan.buffers.push_back({"ws", DType::F32, count * split * d.n, Role::Workspace});
      plan.buffers.push_back({"locks", DType::I32, t * d.n_tiles(), Role::InOut});  // tn = 1's count, the most
      l.grid = {uint32_t(tiles), uint32_t(t), uint32_t(top_k * split)};
      l.args = {KernelArg::buf("x"),     KernelArg::buf("bq"),    KernelArg::buf("bs"),
                zeros ? KernelArg::buf("bz") : KernelArg::null(),
                KernelArg::buf("out"),   KernelArg::buf("ws"),    KernelArg::buf("locks"),
                KernelArg::i32(t),       KernelArg::i32(d.n),     KernelArg::i32(d.k),
                KernelArg::i32(d.group), KernelArg::null(),       KernelArg::f32(0.0f),
                KernelArg::null(),       KernelArg::null(),       KernelArg::null(),
                KernelArg::buf("logits"), KernelArg::i32(e),      KernelArg::i32(top_k),
                KernelArg::i32(s["R"]),  KernelArg::null()};
    }
    plan.launches = {l};
    return plan;
  };
  const KernelFamily* src = &base;
  f.make_inputs = [src, gate_up](const Shape& s, uint64_t seed) {
    HostBuffers in = src->make_inputs(grouped_shape(s), seed);
    add_logits(s, seed, in);
    // One arrival counter per column tile of each routed row (gate|up) or token (down).
    const int64_t counters = gate_up ? s["T"] * s["TOPK"] * (s["N"] / 64) : s["T"] * cdiv(s["N"], 64);
    in["locks"] = std::vector<uint8_t>(size_t(counters * 4), 0);
    if (!gate_up) in["out"] = residual_input(s["T"] * s["N"], seed);
    return in;
  };
  f.reference = [src, gate_up](const Shape& s, const HostBuffers& in) {
    std::vector<Expected> e = src->reference(grouped_shape(s), in);
    if (!gate_up) e = {combined(e.front(), s, in)};
    Expected locks;  // every arrival counter is back at zero for the next launch
    locks.buffer = "locks";
    locks.values.assign(in.at("locks").size() / 4, 0.0f);
    e.push_back(locks);
    return e;
  };
  // A decode step's shapes of the grouped family's (T up to 16), with the model's renormalization.
  const auto grouped_shapes = base.model_shapes;
  f.model_shapes = [grouped_shapes](const ModelConfig& c, const ModelWeights* w) {
    std::vector<Shape> out;
    for (const Shape& s : grouped_shapes ? grouped_shapes(c, w) : std::vector<Shape>{})
      if (s["T"] <= kMaxTokens) out.push_back(routed_shape(s, c.norm_topk_prob));
    return out;
  };
  const int64_t g = fmt.type == WeightType::AWQ_INT4 ? 32 : 64;
  // E <= 32 and 16 groups along K: every point accepts it.
  f.probe_shape = Shape{kDims, {1, 32, 8, gate_up ? 768 : 2048, 2048, 128, 1}, "probe"};
  if (gate_up) {
    f.test_shapes = {Shape{kDims, {1, 16, 4, 128, 256, g, 1}, "decode: one token, 4 of 16 experts, renormalized"},
                     Shape{kDims, {3, 8, 2, 64, 128, g, 0}, "tiny golden MoE, 3 tokens, softmax weights"},
                     Shape{kDims, {16, 8, 2, 64, 256, g, 1}, "16 tokens: experts repeat"},
                     Shape{kDims, {1, 128, 8, 64, 128, g, 1}, "Qwen3-30B-A3B routing: 8 of 128 experts"},
                     Shape{kDims, {2, 16, 4, 128, 512, 128, 1}, "groups of 128: every ring depth"},
                     Shape{kDims, {2, 16, 4, 64, 240, 16, 1}, "groups of 16, a step each: the shared ring across them"}};
  } else {
    f.test_shapes = {Shape{kDims, {1, 16, 4, 256, 128, g, 1}, "decode: one token, 4 of 16 experts, renormalized"},
                     Shape{kDims, {3, 8, 2, 128, 64, g, 0}, "tiny golden MoE, 3 tokens, softmax weights"},
                     Shape{kDims, {5, 4, 3, 200, 256, g, 1}, "5 tokens, N = 200: a partial column tile"},
                     Shape{kDims, {1, 128, 8, 128, 64, g, 0}, "Qwen3-30B-A3B routing: 8 of 128 experts"},
                     Shape{kDims, {2, 16, 4, 128, 512, 128, 0}, "groups of 128: every ring depth"},
                     Shape{kDims, {2, 16, 4, 128, 240, 16, 0}, "groups of 16, a step each: the shared ring across them"}};
  }
  return f;
}

}  // namespace

const std::vector<const KernelFamily*>& families() {
  static const std::deque<KernelFamily> all = two_per_format(formats(), make);
  static const std::vector<const KernelFamily*> f = family_pointers(all);
  return f;
}

Shape routed_shape(const Shape& grouped, bool renormalize) {
  Shape r = grouped;
  r.names.push_back("R"), r.values.push_back(renormalize ? 1 : 0);
  return r;
}

Shape gate_up_shape(int64_t tokens, int64_t experts, int64_t top_k, bool renormalize, int64_t dim, int64_t hidden,
                    int64_t group) {
  return Shape{kDims, {tokens, experts, top_k, hidden, dim, group, renormalize ? 1 : 0}, "expert.w1+w3"};
}
Shape down_shape(int64_t tokens, int64_t experts, int64_t top_k, bool renormalize, int64_t dim, int64_t hidden,
                 int64_t group) {
  return Shape{kDims, {tokens, experts, top_k, dim, hidden, group, renormalize ? 1 : 0}, "expert.w2"};
}

bool serves_decode(WeightType t, const Shape& gate_up, const Shape& down) {
  auto runs = [&](const std::string& op, const Shape& s) {
    for (const KernelFamily* f : families()) {
      if (f->op != op || !f->serves(t)) continue;
      for (const Point& p : f->default_points(s))
        if ((!f->point_constraint || f->point_constraint(p).empty()) && f->shape_constraint(p, s).empty()) return true;
    }
    return false;
  };
  return runs(kGateUpOp, gate_up) && runs(kDownResidualOp, down);
}

}  // namespace qt::kernels::moe_stream
