// moe_gating, moe_init_routing, moe_align and moe_finalize: the routing steps around the grouped GEMMs.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/moe/moe_family.h"
#include "kernels_src/moe/moe_family_util.h"
#include "kernels_src/moe/moe_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::moe {
namespace {

using Role = BufferSpec::Role;
const char* kSource = "moe/moe_routing.cuh";
constexpr int64_t kMaxExperts = 1024;  // moe_place_kernel's shared-memory histogram


template <class T>
Expected exact(const std::string& name, const std::vector<T>& v) {
  Expected e;
  e.buffer = name;
  for (T x : v) e.values.push_back(float(x));
  return e;
}

// ---- gating ----

KernelFamily make_gating() {
  KernelFamily f;
  f.name = "moe_gating";
  f.op = "moe_gating";
  f.dtypes = "f16->i32,f32";
  f.dims = {"M", "E", "K", "R"};
  f.source = kSource;
  f.source_hash = kFamilySourceHash;
  f.summary = "router softmax (fp32) + top-k (ties to the lower expert) + optional renorm: a warp per token";
  f.params = {{"warps", {1, 2, 4, 8}, 4, "tokens (warps) per block"},
              {"epl", {1, 2, 4, 8, 16, 32}, 4, "experts per lane: E <= 32 * epl"}};
  for (int64_t epl : {1, 4, 8, 32}) f.defaults.push_back({{"warps", 4}, {"epl", epl}});
  f.shape_constraint = [](const Point& p, const Shape& s) {
    if (s["M"] < 1 || s["E"] < 1 || s["K"] < 1) return std::string("M, E and K must be positive");
    if (s["K"] > s["E"]) return std::string("K (experts per token) exceeds E");
    if (s["K"] > 32) return std::string("K must be at most 32");
    if (s["R"] != 0 && s["R"] != 1) return std::string("R (renormalize) is 0 or 1");
    if (s["E"] > 32 * p.at("epl")) return "E exceeds 32 * epl = " + std::to_string(32 * p.at("epl"));
    return std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{name_expr("moe_gating_kernel", {p.at("warps"), p.at("epl")})}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], e = s["E"], k = s["K"];
    LaunchPlan plan;
    plan.buffers = {{"logits", DType::F16, m * e, Role::Input},
                    {"ids", DType::I32, m * k, Role::Output},
                    {"weights", DType::F32, m * k, Role::Output}};
    Launch l;
    l.kernel = name_expr("moe_gating_kernel", {p.at("warps"), p.at("epl")});
    l.grid.x = uint32_t(cdiv(m, p.at("warps")));
    l.block.x = uint32_t(32 * p.at("warps"));
    l.args = {KernelArg::buf("logits"), KernelArg::buf("ids"), KernelArg::buf("weights"), KernelArg::i32(m),
              KernelArg::i32(e), KernelArg::i32(k), KernelArg::i32(s["R"])};
    plan.launches.push_back(l);
    return plan;
  };
  // Logits on a grid of 1/8 in [-4, 4], so ties are frequent; every third row is constant (all tied).
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    std::vector<uint16_t> l(size_t(s["M"] * s["E"]));
    for (int64_t m = 0; m < s["M"]; ++m)
      for (int64_t e = 0; e < s["E"]; ++e)
        l[size_t(m * s["E"] + e)] = float_to_half_bits(m % 3 == 2 ? 0.5f : float(int(rng.below(65)) - 32) / 8.0f);
    return HostBuffers{{"logits", bytes_of(l)}};
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const auto l16 = from_bytes<uint16_t>(in.at("logits"));
    std::vector<float> l(l16.size());
    for (size_t i = 0; i < l.size(); ++i) l[i] = half_bits_to_float(l16[i]);
    std::vector<int32_t> ids(size_t(s["M"] * s["K"]));
    std::vector<float> w(ids.size());
    gating(l.data(), s["M"], s["E"], s["K"], s["R"] != 0, ids.data(), w.data());
    Expected we = exact("weights", w);
    we.rel_tol = 1e-5;  // expf and the sum's order differ from the host's by a few ulps
    we.abs_tol = 1e-7;
    return std::vector<Expected>{exact("ids", ids), we};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    std::vector<Shape> out;
    if (!c.is_moe()) return out;
    for (int64_t t : token_buckets())
      out.push_back(Shape{{"M", "E", "K", "R"}, {t, c.num_experts, c.num_experts_per_tok, c.norm_topk_prob ? 1 : 0}, "router"});
    return out;
  };
  f.probe_shape = Shape{f.dims, {64, 32, 8, 1}, "probe"};  // E <= 32: every epl accepts it
  f.test_shapes = {Shape{f.dims, {7, 8, 2, 1}, "tiny golden model: E=8, k=2, renormalized"},
                   Shape{f.dims, {5, 128, 8, 0}, "Qwen3-30B-A3B router, not renormalized"},
                   Shape{f.dims, {4, 6, 6, 1}, "k = E: every expert chosen"},
                   Shape{f.dims, {3, 200, 5, 1}, "E not a multiple of 32"}};
  return f;
}

// ---- init routing ----
// Dims: M tokens, K experts per token, E experts, H hidden, S/T the active range [S, T), Q int8 expansion
// (0/1), V key-value token counts (0 count mode, 1 key-value).

const std::vector<std::string> kInitDims = {"M", "K", "E", "H", "S", "T", "Q", "V"};

std::string expand_kernel(const Point& p) { return name_expr("moe_expand_kernel", {p.at("threads")}); }

KernelFamily make_init_routing() {
  KernelFamily f;
  f.name = "moe_init_routing";
  f.op = "moe_init_routing";
  f.dtypes = "i32,f16->i32,f16|i8";
  f.dims = kInitDims;
  f.source = kSource;
  f.source_hash = kFamilySourceHash;
  f.summary = "MoeInitRoutingV3: stable sort by expert (a warp per expert, ballots), scatter index, counts, "
              "active range, expanded rows (int8 per row when Q=1)";
  f.params = {{"warps", {2, 4, 8}, 4, "experts placed per block (a warp each)"},
              {"threads", {64, 128, 256}, 128, "threads per expanded row"}};
  f.defaults = {{{"warps", 4}, {"threads", 128}}};
  f.shape_constraint = [](const Point&, const Shape& s) {
    for (const char* d : {"M", "K", "E", "H"})
      if (s[d] < 1) return std::string("M, K, E and H must be positive");
    if (s["E"] > kMaxExperts) return "E exceeds " + std::to_string(kMaxExperts);
    if (s["S"] < 0 || s["T"] > s["E"] || s["S"] > s["T"]) return std::string("the active range [S, T) must lie in [0, E)");
    if ((s["Q"] != 0 && s["Q"] != 1) || (s["V"] != 0 && s["V"] != 1)) return std::string("Q and V are 0 or 1");
    if (s["M"] * s["K"] * s["H"] > INT32_MAX) return std::string("M*K*H must stay below 2^31");
    return std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{place_kernel(p.at("warps")), expand_kernel(p)}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], k = s["K"], e = s["E"], h = s["H"], range = s["T"] - s["S"], count = m * k;
    const bool quant = s["Q"] != 0, kv = s["V"] != 0;
    LaunchPlan plan;
    plan.buffers = {{"ids", DType::I32, count, Role::Input},
                    {"x", DType::F16, m * h, Role::Input},
                    {"sorted_row", DType::I32, count, Role::Output},
                    {"expanded_row_idx", DType::I32, count, Role::Output},
                    {"total", DType::I32, 1, Role::Output}};
    if (kv) {
      plan.buffers.push_back({"pairs", DType::I64, std::max<int64_t>(1, 2 * range), Role::Output});
      plan.buffers.push_back({"pairs_used", DType::I32, 1, Role::Output});
    } else {
      plan.buffers.push_back({"counts", DType::I64, std::max<int64_t>(1, range), Role::Output});
    }
    if (quant) {
      plan.buffers.push_back({"expanded_q", DType::I8, count * h, Role::Output});
      plan.buffers.push_back({"expanded_scale", DType::F32, count, Role::Output});
    } else {
      plan.buffers.push_back({"expanded_x", DType::F16, count * h, Role::Output});
    }
    PlaceBuffers pb;
    pb.sorted = "sorted_row", pb.position = "expanded_row_idx", pb.total = "total";
    if (kv) pb.pairs = "pairs", pb.pairs_used = "pairs_used";
    else pb.counts = "counts";
    const Launch place = place_launch(p.at("warps"), pb, count, e, s["S"], s["T"], 1, count, -1);
    Launch expand;
    expand.kernel = expand_kernel(p);
    expand.grid.x = uint32_t(count);
    expand.block.x = uint32_t(p.at("threads"));
    expand.args = {KernelArg::buf("x"), KernelArg::buf("sorted_row"), KernelArg::buf("total"),
                   quant ? KernelArg::null() : KernelArg::buf("expanded_x"),
                   quant ? KernelArg::buf("expanded_q") : KernelArg::null(),
                   quant ? KernelArg::buf("expanded_scale") : KernelArg::null(), KernelArg::i32(k), KernelArg::i32(h),
                   KernelArg::i32(quant ? 1 : 0)};
    plan.launches = {place, expand};
    return plan;
  };
  // ids by pattern seed % 3 (moe make_ids); x in [-1, 1) with an all-zero token 1 (scale 0 when quantized).
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    const auto ids = routed_ids(s["M"], s["K"], s["E"], int((seed + 2) % 3), rng);
    std::vector<uint16_t> x(size_t(s["M"] * s["H"]));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float_to_half_bits(int64_t(i) / s["H"] == 1 ? 0.0f : float(2.0 * rng.uniform() - 1.0));
    return HostBuffers{{"ids", bytes_of(ids)}, {"x", bytes_of(x)}};
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const int64_t m = s["M"], k = s["K"], h = s["H"], range = s["T"] - s["S"];
    const auto ids = from_bytes<int32_t>(in.at("ids"));
    const auto x16 = from_bytes<uint16_t>(in.at("x"));
    std::vector<float> x(x16.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = half_bits_to_float(x16[i]);
    const bool kv = s["V"] != 0;
    const InitRouting r = init_routing(ids.data(), m, k, s["E"], s["S"], s["T"], kv ? TokenCounts::KeyValue : TokenCounts::Count);
    std::vector<Expected> out = {exact("sorted_row", r.sorted_row), exact("expanded_row_idx", r.expanded_row_idx),
                                 exact("total", std::vector<int64_t>{r.active})};
    if (kv) {
      std::vector<int64_t> pairs = r.expert_tokens;
      pairs.resize(size_t(std::max<int64_t>(1, 2 * range)), 0);
      out.push_back(exact("pairs", pairs));
      out.push_back(exact("pairs_used", std::vector<int64_t>{int64_t(r.expert_tokens.size() / 2)}));
    } else {
      std::vector<int64_t> counts = r.expert_tokens;
      counts.resize(size_t(std::max<int64_t>(1, range)), 0);
      out.push_back(exact("counts", counts));
    }
    // Rows past the active ones are zero: the expand kernel clears them.
    const size_t rows = size_t(m * k);
    if (s["Q"] != 0) {
      std::vector<int8_t> q(rows * size_t(h), 0);
      std::vector<float> scale(rows, 0.0f);
      expand_rows_int8(r, k, x.data(), h, q.data(), scale.data());
      out.push_back(exact("expanded_q", q));
      Expected se = exact("expanded_scale", scale);
      se.rel_tol = 1e-7;
      out.push_back(se);
    } else {
      std::vector<float> e(rows * size_t(h), 0.0f);
      expand_rows(r, k, x.data(), h, e.data());
      out.push_back(exact("expanded_x", e));
    }
    return out;
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    std::vector<Shape> out;
    if (!c.is_moe()) return out;
    for (int64_t t : token_buckets())
      out.push_back(Shape{kInitDims, {t, c.num_experts_per_tok, c.num_experts, c.dim, 0, c.num_experts, 0, 0}, "routing"});
    return out;
  };
  f.probe_shape = Shape{kInitDims, {64, 8, 128, 2048, 0, 128, 1, 1}, "probe"};
  f.test_shapes = {Shape{kInitDims, {6, 2, 8, 40, 0, 8, 0, 0}, "tiny: E=8, k=2, count mode"},
                   Shape{kInitDims, {5, 3, 8, 33, 2, 6, 1, 1}, "active range [2, 6), int8 rows, key-value counts"},
                   Shape{kInitDims, {3, 4, 4, 16, 0, 4, 0, 1}, "k = E = 4"},
                   Shape{kInitDims, {1, 8, 128, 64, 0, 128, 1, 0}, "one token, Qwen3-30B-A3B routing"}};
  return f;
}

// ---- align ----
// Dims: C routed rows, E experts, B the block (rows per grouped-GEMM tile).

KernelFamily make_align() {
  KernelFamily f;
  f.name = "moe_align";
  f.op = "moe_align";
  f.dtypes = "i32->i32";
  f.dims = {"C", "E", "B"};
  f.source = kSource;
  f.source_hash = kFamilySourceHash;
  f.summary = "moe_align_block_size: rows grouped by expert (stable), each expert padded to B slots, block -> expert";
  f.params = {{"warps", {2, 4, 8}, 4, "experts placed per block (a warp each)"}};
  f.shape_constraint = [](const Point&, const Shape& s) {
    if (s["C"] < 1 || s["E"] < 1 || s["B"] < 1) return std::string("C, E and B must be positive");
    if (s["E"] > kMaxExperts) return "E exceeds " + std::to_string(kMaxExperts);
    if (align_capacity(s["C"], s["E"], s["B"]) > INT32_MAX) return std::string("too many slots for 32-bit indices");
    return std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{place_kernel(p.at("warps"))}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t c = s["C"], e = s["E"], b = s["B"], cap = align_capacity(c, e, b);
    LaunchPlan plan;
    plan.buffers = {{"ids", DType::I32, c, Role::Input},
                    {"sorted", DType::I32, cap, Role::Output},
                    {"position", DType::I32, c, Role::Output},
                    {"block_expert", DType::I32, cap / b, Role::Output},
                    {"total", DType::I32, 1, Role::Output}};
    PlaceBuffers pb;
    pb.sorted = "sorted", pb.position = "position", pb.block_expert = "block_expert", pb.total = "total";
    const Launch l = place_launch(p.at("warps"), pb, c, e, 0, e, b, cap, c);
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    const int64_t k = s["C"] % 4 == 0 ? 4 : 1;  // tokens of 4 experts each when C allows, else single rows
    return HostBuffers{{"ids", bytes_of(routed_ids(s["C"] / k, k, s["E"], int((seed + 2) % 3), rng))}};
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const auto ids = from_bytes<int32_t>(in.at("ids"));
    const Alignment a = align_blocks(ids.data(), s["C"], s["E"], s["B"]);
    std::vector<int32_t> position(ids.size());
    for (size_t slot = 0; slot < a.sorted_ids.size(); ++slot)
      if (a.sorted_ids[slot] < s["C"]) position[size_t(a.sorted_ids[slot])] = int32_t(slot);
    return std::vector<Expected>{exact("sorted", a.sorted_ids), exact("position", position),
                                 exact("block_expert", a.block_expert), exact("total", std::vector<int64_t>{a.padded})};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    std::vector<Shape> out;
    if (!c.is_moe()) return out;
    for (int64_t t : token_buckets())
      for (int64_t b : {int64_t(1), int64_t(16), int64_t(64)})
        out.push_back(Shape{{"C", "E", "B"}, {t * c.num_experts_per_tok, c.num_experts, b}, "align"});
    return out;
  };
  f.probe_shape = Shape{f.dims, {4096, 128, 64}, "probe"};
  f.test_shapes = {Shape{f.dims, {16, 8, 4}, "vLLM's documented example size: 4 tokens x 4, blocks of 4"},
                   Shape{f.dims, {8, 128, 16}, "decode, Qwen3-30B-A3B: 8 rows over 128 experts"},
                   Shape{f.dims, {37, 5, 1}, "blocks of 1 (no padding), odd row count"}};
  return f;
}

// ---- finalize ----

KernelFamily make_finalize() {
  KernelFamily f;
  f.name = "moe_finalize";
  f.op = "moe_finalize";
  f.dtypes = "f16,f32->f16";
  f.dims = {"M", "K", "H"};
  f.source = kSource;
  f.source_hash = kFamilySourceHash;
  f.summary = "each token's k expert rows, weighted and summed in fp32 (a token's columns over several blocks)";
  f.params = {{"threads", {64, 128, 256}, 128, "threads per token"}, {"vec", {1, 2, 4, 8}, 4, "columns per thread and step"}};
  f.defaults = {{{"threads", 128}, {"vec", 4}}, {{"threads", 64}, {"vec", 1}}};
  f.shape_constraint = [](const Point& p, const Shape& s) {
    if (s["M"] < 1 || s["K"] < 1 || s["H"] < 1) return std::string("M, K and H must be positive");
    if (s["H"] % p.at("vec")) return "H must be a multiple of vec=" + std::to_string(p.at("vec"));
    return std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{name_expr("moe_finalize_kernel", {p.at("threads"), p.at("vec")})}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], k = s["K"], h = s["H"];
    LaunchPlan plan;
    plan.buffers = {{"y", DType::F16, m * k * h, Role::Input},
                    {"rows", DType::I32, m * k, Role::Input},
                    {"weights", DType::F32, m * k, Role::Input},
                    {"out", DType::F16, m * h, Role::Output}};
    Launch l;
    l.kernel = name_expr("moe_finalize_kernel", {p.at("threads"), p.at("vec")});
    l.grid.x = uint32_t(m);
    l.grid.y = uint32_t(cdiv(h, p.at("threads") * p.at("vec")));  // every thread one VEC of columns
    l.block.x = uint32_t(p.at("threads"));
    l.args = {KernelArg::buf("y"), KernelArg::buf("rows"), KernelArg::buf("weights"), KernelArg::buf("out"),
              KernelArg::i32(k), KernelArg::i32(h)};
    plan.launches.push_back(l);
    return plan;
  };
  // rows: a random permutation of the routed rows (as init routing's scatter index would give).
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    const int64_t c = s["M"] * s["K"];
    std::vector<uint16_t> y(size_t(c * s["H"]));
    for (auto& v : y) v = float_to_half_bits(float(4.0 * rng.uniform() - 2.0));
    std::vector<int32_t> rows(static_cast<size_t>(c));
    std::iota(rows.begin(), rows.end(), 0);
    rng.shuffle(rows);
    std::vector<float> w(static_cast<size_t>(c));
    for (auto& v : w) v = float(rng.uniform());
    return HostBuffers{{"y", bytes_of(y)}, {"rows", bytes_of(rows)}, {"weights", bytes_of(w)}};
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const auto y16 = from_bytes<uint16_t>(in.at("y"));
    std::vector<float> y(y16.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = half_bits_to_float(y16[i]);
    std::vector<float> out(size_t(s["M"] * s["H"]));
    finalize(y.data(), from_bytes<int32_t>(in.at("rows")).data(), from_bytes<float>(in.at("weights")).data(), s["M"],
             s["K"], s["H"], out.data());
    Expected e = exact("out", out);
    e.rel_tol = std::ldexp(1.0, -10);  // one fp16 rounding of the same fp32 sum
    e.abs_tol = 1e-6;
    return std::vector<Expected>{e};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    std::vector<Shape> out;
    if (!c.is_moe()) return out;
    for (int64_t t : token_buckets()) out.push_back(Shape{{"M", "K", "H"}, {t, c.num_experts_per_tok, c.dim}, "finalize"});
    return out;
  };
  f.probe_shape = Shape{f.dims, {64, 8, 2048}, "probe"};
  f.test_shapes = {Shape{f.dims, {5, 2, 128}, "tiny golden model"}, Shape{f.dims, {3, 8, 2048}, "Qwen3-30B-A3B"}};
  return f;
}

// The hidden state plus the finalized MoE output, in place (RESIDUAL = 1): the decode step's residual add in the
// finalize launch. The same schedule as moe_finalize, whose chosen point the runtime runs it at
// (KernelChooser::choose_fused), so it carries no model shapes to tune.
KernelFamily make_finalize_residual(const KernelFamily& base) {
  KernelFamily f = base;
  f.name = "moe_finalize_residual";
  f.op = "moe_finalize_residual";
  f.summary = "moe_finalize adding the token's MoE output to the hidden state in place (the residual add fused)";
  f.model_shapes = nullptr;
  auto kernel = [](const Point& p) { return name_expr("moe_finalize_kernel", {p.at("threads"), p.at("vec"), 1}); };
  f.kernels = [kernel](const Point& p) { return std::vector<std::string>{kernel(p)}; };
  f.plan = [base, kernel](const Point& p, const Shape& s) {
    LaunchPlan plan = base.plan(p, s);
    for (BufferSpec& b : plan.buffers)
      if (b.name == "out") b.role = Role::InOut;
    plan.launches.front().kernel = kernel(p);
    return plan;
  };
  f.make_inputs = [base](const Shape& s, uint64_t seed) {
    HostBuffers in = base.make_inputs(s, seed);
    in["out"] = residual_input(s["M"] * s["H"], seed);
    return in;
  };
  f.reference = [base](const Shape& s, const HostBuffers& in) {
    std::vector<Expected> e = base.reference(s, in);
    expect_residual_add(e[0], in.at("out"));
    return e;
  };
  return f;
}

}  // namespace

std::string place_kernel(int64_t warps) { return name_expr("moe_place_kernel", {warps}); }

Launch place_launch(int64_t warps, const PlaceBuffers& b, int64_t count, int64_t experts, int64_t start, int64_t end,
                    int64_t block, int64_t cap, int64_t sentinel) {
  auto arg = [](const std::string& name) { return name.empty() ? KernelArg::null() : KernelArg::buf(name); };
  Launch l;
  l.kernel = place_kernel(warps);
  l.grid.x = uint32_t(cdiv(experts, warps));
  l.block.x = uint32_t(32 * warps);
  l.args = {KernelArg::buf("ids"), arg(b.sorted), arg(b.position), arg(b.counts), arg(b.pairs), arg(b.pairs_used),
            arg(b.block_expert), arg(b.total), KernelArg::i32(count), KernelArg::i32(experts), KernelArg::i32(start),
            KernelArg::i32(end), KernelArg::i32(block), KernelArg::i32(cap), KernelArg::i32(sentinel)};
  return l;
}

std::vector<int32_t> routed_ids(int64_t rows, int64_t k, int64_t experts, int pattern, Rng& rng) {
  std::vector<int32_t> ids(size_t(rows * k));
  const int64_t pool = experts > k ? experts - 1 : experts;
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(pool));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t j = 0; j < k; ++j) {
      int32_t e = 0;
      if (pattern == 0) {
        // A draw biased towards the front of the remaining experts, without replacement.
        const size_t at = size_t(j) + size_t(rng.below(uint64_t(std::max<int64_t>(1, (pool - j + 1) / 2))));
        std::swap(order[size_t(j)], order[at]);
        e = order[size_t(j)];
      } else if (pattern == 2) {
        e = int32_t(rng.below(uint64_t(experts)));
      }
      ids[size_t(t * k + j)] = e;
    }
  }
  return ids;
}

double expected_experts(int64_t tokens, int64_t experts, int64_t topk) {
  if (experts <= 0) return 0.0;
  const double miss = 1.0 - double(std::min(topk, experts)) / double(experts);  // one token misses an expert
  return double(experts) * (1.0 - std::pow(miss, double(tokens)));
}

double expected_row_blocks(int64_t tokens, int64_t experts, int64_t topk, int64_t bm) {
  if (experts <= 0 || tokens <= 0 || bm <= 0) return 0.0;
  // One expert's rows: Binomial(tokens, p). Its blocks are ceil(rows / bm), summed over the pmf from one row up,
  // each term taken in log space so that large token counts neither underflow nor overflow, until the terms
  // past the mode vanish.
  const double p = double(std::min(topk, experts)) / double(experts);
  if (p >= 1.0) return double(experts) * double(cdiv(tokens, bm));
  const double n = double(tokens);
  auto log_pmf = [&](double j) {
    return std::lgamma(n + 1) - std::lgamma(j + 1) - std::lgamma(n - j + 1) + j * std::log(p) + (n - j) * std::log1p(-p);
  };
  double blocks = 0;
  for (int64_t j = 1; j <= tokens; ++j) {
    const double pr = std::exp(log_pmf(double(j)));
    blocks += pr * double(cdiv(j, bm));
    if (pr < 1e-14 && double(j) > n * p) break;  // past the mode, the tail adds nothing a double keeps
  }
  return double(experts) * blocks;
}

namespace {

// The expert stacks of a grouped plan, every expert's: its inputs but the activations and the routing.
double stack_bytes(const LaunchPlan& plan) {
  double bytes = 0;
  for (const BufferSpec& b : plan.buffers)
    if (is_weight_buffer(b)) bytes += double(b.bytes());
  return bytes;
}

}  // namespace

std::vector<Point> grouped_defaults_for(const Shape& s, const Point& small, const Point& large,
                                        const std::vector<Point>& all) {
  const double per_expert = double(s["T"] * s["TOPK"]) / double(s["E"]);
  if (per_expert <= 1.0) return all;
  return per_expert < 32.0 ? lead_with({small, large}, all) : lead_with({large, small}, all);
}

void set_grouped_bytes(KernelFamily& f, bool x_in_flight) {
  f.bytes_moved = [plan = f.plan](const Point& p, const Shape& s) {
    const LaunchPlan lp = plan(p, s);
    const double stacks = stack_bytes(lp);
    return plan_bytes_moved(lp) - stacks + stacks * expected_experts(s["T"], s["E"], s["TOPK"]) / double(s["E"]);
  };
  f.bytes_reread = [x_in_flight](const Point& p, const Shape& s, const LaunchPlan& plan) {
    // Each expert's weights are loaded once per block of its rows: the first load of every touched expert is
    // DRAM traffic, the rest re-reads. The blocks are counted over the rows' spread, not from their mean: at a
    // mean of exactly bm rows an expert, about half the experts take a second block.
    const double touched = expected_experts(s["T"], s["E"], s["TOPK"]);
    const double blocks = expected_row_blocks(s["T"], s["E"], s["TOPK"], p.at("bm"));
    // Every routed row gathers its token's activations (T x TOPK rows of K, whatever x's own rows), once per
    // column block.
    const double routed_x = double(s["T"] * s["TOPK"] * s["K"] * 2);
    const double column_blocks = double(plan.launches.at(main_launch(plan)).grid.x);
    return stack_bytes(plan) / double(s["E"]) * std::max(0.0, blocks - touched) +
           (x_in_flight ? routed_x * (column_blocks - 1) : 0.0);
  };
}

std::vector<int64_t> token_buckets() {
  std::vector<int64_t> t;
  for (int64_t v = 1; v <= 4096; v *= 2) t.push_back(v);
  return t;
}

const KernelFamily& gating_family() {
  static const KernelFamily f = make_gating();
  return f;
}
const KernelFamily& init_routing_family() {
  static const KernelFamily f = make_init_routing();
  return f;
}
const KernelFamily& align_family() {
  static const KernelFamily f = make_align();
  return f;
}
const KernelFamily& finalize_family() {
  static const KernelFamily f = make_finalize();
  return f;
}

const KernelFamily& finalize_residual_family() {
  static const KernelFamily f = make_finalize_residual(finalize_family());
  return f;
}

}  // namespace qt::kernels::moe
