#include <algorithm>
#include <cmath>
#include <string>

#include "kernels_src/attention/attention_family.h"
#include "kernels_src/attention/attention_problem.h"
#include "kernels_src/registry/family_util.h"
#include "kernels_src/rope_kv/rope_kv_reference.h"
#include "common/half.h"
#include "common/rng.h"
#include "family_source_hash.h"

namespace qt::kernels::attention {
namespace {

using Role = BufferSpec::Role;

constexpr int64_t kMaxSmem = 227 * 1024;  // the largest opt-in dynamic shared memory of any target (sm_90)

// The tile's work on tensor cores (attention_decode_mma_kernel) or on the CUDA cores (attention_decode_kernel).
bool on_tensor_cores(const Point& p) { return p.count("mma") && p.at("mma") == 1; }

std::string decode_kernel(const Point& p, bool rope = false) {
  const char* kernel = on_tensor_cores(p) ? "attention_decode_mma_kernel" : "attention_decode_kernel";
  if (!rope) return name_expr(kernel, {p.at("threads"), p.at("tile"), p.at("stages")});
  return name_expr(kernel, {p.at("threads"), p.at("tile"), p.at("stages"), 1});
}

// The tensor-core kernel's limits: its registers hold head dims up to 128 in k-steps of 16, and its A operand
// the R query heads of a KV head as at most 16 rows.
constexpr int64_t kMmaMaxHeadDim = 128, kMmaMaxHeadsPerKv = 16;

// Mirrors attn_decode::row_stride and token_groups in attention_decode.cuh.
int64_t row_stride(int64_t d) { return (d / 8) % 2 == 1 ? d : d + 8; }
// Mirrors attn_decode::mma_ring_halves: the K/V ring, at least as large as the warps' results that reuse it.
int64_t mma_ring_bytes(const Point& p, int64_t heads_per_kv, int64_t d) {
  const int64_t ring = 2 * p.at("stages") * p.at("tile") * row_stride(d);
  const int64_t results = p.at("threads") / 32 * heads_per_kv * (d + 2) * 2;
  return ((std::max(ring, results) + 7) & ~int64_t(7)) * 2;
}
// Mirrors attn_decode::split_range: the context's tiles, and the tiles of a split's run (the first splits').
struct SplitTiles {
  int64_t tiles, per_split;
};
SplitTiles split_tiles(const Point& p, const AttentionProblem& a) {
  const int64_t tiles = (a.pos0 + 1 + p.at("tile") - 1) / p.at("tile");
  return {tiles, (tiles + p.at("splits") - 1) / p.at("splits")};
}
int64_t accumulator_floats(int64_t threads, int64_t heads_per_kv, int64_t d) {
  const int64_t pairs = heads_per_kv * (d / 8);
  const int64_t groups = pairs >= threads ? 1 : threads / pairs;
  return groups * pairs * 8;
}

KernelFamily make_decode() {
  KernelFamily f;
  f.name = "attention_decode";
  f.op = "attention_decode";
  f.dtypes = "f16->f16";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "attention/attention_decode.cuh";
  f.summary = "flash-decoding: GQA block per KV head, context split over blocks, fp32 partials combined by the "
              "last block of each KV head in the same launch";
  f.min_sm = 80;
  f.params = {{"threads", {64, 128, 256}, 128, "threads per block"},
              {"tile", {16, 32, 64, 128}, 32, "context tokens per shared-memory tile"},
              {"stages", {2, 3}, 2, "cp.async pipeline stages of K/V tiles"},
              {"splits", {1, 2, 4, 8, 16, 32, 64}, 8,
               "blocks along the context (fp32 partials, combined in the same launch when > 1)"}};
  // Added after the H200 runs: their stored points ran the CUDA-core kernel, as a point typed without it does
  // (the defaults below lead with the tensor cores). Every report times the default's twin on the other core
  // beside it (report_ab): no GPU has yet run the tensor-core kernel.
  Param core{"mma", {0, 1}, 0,
             "the tile's work: 0 on CUDA cores (a thread per score from shared memory, three block barriers a "
             "tile), 1 on tensor cores (mma.m16n8k16, a warp per 16-token slice, one barrier a tile)"};
  core.report_ab = true;
  core.absent_value = 0;
  f.params.push_back(core);
  // The first default is the untuned fallback at the shapes defaults_for has no rule for. The tensor-core tile is
  // 64 tokens: a 16-token slice for each of 4 warps. The second is its twin on the CUDA cores: the A/B every
  // report times beside it, and the choice for the shapes the tensor-core kernel cannot take (a head dim not a
  // multiple of 16 or over 128, more than 16 query heads a KV head). The last three are the longest context's
  // split count, verified in CI like the others (the split count is a launch's grid, not code): the first two
  // again, and the CUDA-core default the H200 runs measured.
  f.defaults = {{{"threads", 128}, {"tile", 64}, {"stages", 2}, {"splits", 8}, {"mma", 1}},
                {{"threads", 128}, {"tile", 64}, {"stages", 2}, {"splits", 8}, {"mma", 0}},
                {{"threads", 256}, {"tile", 64}, {"stages", 2}, {"splits", 1}, {"mma", 0}},
                {{"threads", 64}, {"tile", 16}, {"stages", 3}, {"splits", 4}, {"mma", 0}},
                {{"threads", 128}, {"tile", 64}, {"stages", 2}, {"splits", kMaxDefaultSplits}, {"mma", 1}},
                {{"threads", 128}, {"tile", 64}, {"stages", 2}, {"splits", kMaxDefaultSplits}, {"mma", 0}},
                {{"threads", 128}, {"tile", 32}, {"stages", 2}, {"splits", kMaxDefaultSplits}, {"mma", 0}}};
  // Untuned, the split count follows the context: the grid is KV heads x splits blocks, and a fixed 8 splits
  // put 64 blocks of the Qwen3-8B shape (8 KV heads) on a 132-SM H200, each streaming its share of the cache
  // with one tile pair in flight: the static model gives 9% of the measured bandwidth at 32K tokens (386 us a
  // layer), against 64% with 64 splits (54 us). So: splits_for_context's count first, on either core (the CUDA
  // cores for the shapes the tensor cores cannot take), then the fixed defaults.
  f.defaults_for = [defaults = f.defaults](const Shape& s) {
    const AttentionProblem a = problem(s);
    std::vector<Point> leaders = {defaults[0], defaults[1]};
    for (Point& p : leaders) p["splits"] = splits_for_context(a.pos0 + a.m, a.kv_heads);
    return lead_with(leaders, defaults);
  };
  f.point_constraint = [](const Point& p) {
    // K and V tiles at head dim 128 within 160 KiB leave room for the rest on every target that has it.
    if (2 * p.at("stages") * p.at("tile") * row_stride(128) * 2 > 160 * 1024)
      return std::string("K/V tiles over 160 KiB of shared memory at head dim 128");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const AttentionProblem a = problem(shape);
    std::string e = shape_check(a);
    if (!e.empty()) return e;
    if (a.m != 1) return std::string("attention_decode serves one query token (M = 1)");
    if (on_tensor_cores(p) && (a.head_dim % 16 != 0 || a.head_dim > kMmaMaxHeadDim))
      return "the tensor-core kernel (mma=1) takes head dims that are multiples of 16 up to " +
             std::to_string(kMmaMaxHeadDim) + ", not " + std::to_string(a.head_dim);
    if (on_tensor_cores(p) && a.heads / a.kv_heads > kMmaMaxHeadsPerKv)
      return "the tensor-core kernel (mma=1) takes at most " + std::to_string(kMmaMaxHeadsPerKv) +
             " query heads a KV head, not " + std::to_string(a.heads / a.kv_heads);
    if (decode_smem_bytes(p, a.heads / a.kv_heads, a.head_dim) > kMaxSmem)
      return "needs " + std::to_string(decode_smem_bytes(p, a.heads / a.kv_heads, a.head_dim)) +
             " bytes of shared memory (more than 227 KiB)";
    return std::string();
  };
  // The K and V rows of the context (not the cache's capacity), q and out, and each split's partials written
  // and read back.
  f.bytes_moved = [](const Point& p, const Shape& shape) {
    const AttentionProblem a = problem(shape);
    const double kv = 2.0 * double(a.pos0 + 1) * double(a.kv_heads * a.head_dim) * 2;
    const double io = 2.0 * double(a.heads * a.head_dim) * 2;
    const double partials = p.at("splits") > 1 ? 2.0 * double(p.at("splits") * a.heads * (a.head_dim + 2)) * 4 : 0;
    return kv + io + partials;
  };
  // The ring's tiles a block has requested ahead of the one it reads (stages - 1 of K and V, at head dim 128),
  // shared by its warps: both kernels issue the block's copies from every thread.
  f.bytes_in_flight_per_warp = [](const Point& p) {
    return (p.at("stages") - 1) * p.at("tile") * 2 * 128 * 2 / (p.at("threads") / 32);
  };
  // The tile loop, a trip a tile of the split for each warp of the blocks that have tiles. Its PTX text holds
  // each inner loop once: the tensor-core kernel's slice loop (one trip a tile at tile = 16 x warps, counted per
  // slice here), the CUDA-core kernel's score and P V loops (4 trips each of their 4-way unrolled bodies at head
  // dim 128). Read against the loops' trip counts (sm_90a, D = 128), the text is about 0.7x of what the CUDA-core
  // kernel issues a tile (about 1,700 instructions a warp for 32 tokens: 420 a KB of K and V) and about 1.4x of
  // the tensor-core kernel's (about 720 a warp for 64 tokens: 90 a KB, its O rescale skipped; the text holds the
  // copy loops of head dims other than 128, which D = 128 skips).
  f.main_loop = [](const Point& p, const Shape& shape, const LaunchPlan&) -> LoopWork {
    const AttentionProblem a = problem(shape);
    const auto [tiles, per_split] = split_tiles(p, a);
    const int64_t busy_splits = (tiles + per_split - 1) / per_split;
    const int64_t warps = p.at("threads") / 32;
    const int64_t slices_per_warp = on_tensor_cores(p) ? (p.at("tile") / 16 + warps - 1) / warps : 1;
    return {double(a.kv_heads * busy_splits), double(per_split * std::max<int64_t>(1, slices_per_warp))};
  };
  // A block's waits in turn: q and, each time its ring runs dry, a tile's K and V from DRAM (every stages - 1
  // tiles, the first of them at least); then, with splits, its partials and the arrival counter through the L2,
  // and the last block's combine: the splits' maxima, their sums, then their partials 8 splits at a time
  // (attn_decode::combine_splits). At short contexts this chain, not the bytes, is the body: the H200 timed the
  // kernel at 12.8 us a launch at contexts up to 80 (29 Nov), a few tiles of reading.
  f.latency_chain = [](const Point& p, const Shape& shape) {
    const int64_t splits = p.at("splits"), per_split = split_tiles(p, problem(shape)).per_split;
    LatencyChain c;
    c.dram_rounds = double(1 + (per_split + p.at("stages") - 2) / (p.at("stages") - 1));
    if (splits > 1) c.l2_rounds = double(3 + 2 + (splits + 7) / 8);
    return c;
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{decode_kernel(p)}; };
  f.plan = [](const Point& p, const Shape& shape) {
    const AttentionProblem a = problem(shape);
    const int64_t splits = p.at("splits");
    LaunchPlan plan;
    plan.buffers = attention_buffers(a);
    plan.buffers.push_back({"ws", DType::F32, splits > 1 ? splits * a.heads * (a.head_dim + 2) : 1, Role::Workspace});
    // One arrival counter per KV head, zero before and after every launch.
    plan.buffers.push_back({"locks", DType::I32, a.kv_heads, Role::InOut});
    Launch l;
    l.kernel = decode_kernel(p);
    l.grid.x = static_cast<uint32_t>(a.kv_heads);
    l.grid.y = static_cast<uint32_t>(splits);
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    l.dynamic_smem = decode_smem_bytes(p, a.heads / a.kv_heads, a.head_dim);
    l.args = {KernelArg::buf("q"),       KernelArg::buf("k_cache"), KernelArg::buf("v_cache"),
              KernelArg::buf("pos"),     KernelArg::buf("out"),     KernelArg::buf("ws"),
              KernelArg::buf("locks"),   KernelArg::i32(a.heads),   KernelArg::i32(a.kv_heads), KernelArg::i32(a.head_dim),
              KernelArg::i32(a.capacity),
              // ROPE's inputs, unread by this kernel
              KernelArg::null(), KernelArg::null(), KernelArg::null(), KernelArg::null(), KernelArg::f32(0), KernelArg::f32(0)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [](const Shape& shape, uint64_t seed) {
    HostBuffers in = make_attention_inputs(shape, seed);
    in["locks"] = std::vector<uint8_t>(size_t(problem(shape).kv_heads) * 4, 0);
    return in;
  };
  f.reference = [](const Shape& shape, const HostBuffers& in) {
    Expected locks;  // every counter back at zero for the next launch
    locks.buffer = "locks";
    locks.values.assign(size_t(problem(shape).kv_heads), 0.0f);
    // The reference holds every point of the space to one tolerance: the tensor-core kernel's, which rounds each
    // weight to fp16 before P V as prefill does (the CUDA-core kernel keeps them in fp32, inside it).
    return std::vector<Expected>{expected_attention(shape, in, /*p_in_fp16=*/true), locks};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) { return decode_model_shapes(c); };
  f.probe_shape = Shape{kDims, {1, 32, 8, 128, 4096, 2047}, "probe: Qwen3-8B heads, context 2048"};
  f.test_shapes = {Shape{kDims, {1, 8, 2, 128, 320, 300}, "Qwen3-8B GQA ratio 4, D=128, context 301"},
                   Shape{kDims, {1, 4, 2, 40, 128, 70}, "tiny dense: D=40, context 71"},
                   Shape{kDims, {1, 6, 2, 32, 16, 0}, "D=32, first token: context 1"},
                   Shape{kDims, {1, 8, 1, 48, 160, 130}, "D=48, 8 query heads on one KV head, context 131"},
                   Shape{kDims, {1, 2, 2, 40, 37, 36}, "no GQA, the cache full: context C=37"},
                   Shape{kDims, {1, 16, 8, 128, 2048, 1800}, "Qwen3-0.6B heads, context 1801: many tiles per split"}};
  return f;
}

// ---- with the token's q/k norm, RoPE and KV write (ROPE = 1) ---------------------------------------------
// The same schedule on the decode step's raw q, k and v: the runtime runs it at the point it chose for
// attention_decode at the same shape (KernelChooser::choose_fused), so it carries no model shapes to tune.

constexpr float kTestEps = 1e-6f, kTestTheta = 1e6f;  // Qwen3's values

rope_kv::RopeProblem rope_problem(const Shape& s) {
  const AttentionProblem a = problem(s);
  rope_kv::RopeProblem r;
  r.m = a.m, r.heads = a.heads, r.kv_heads = a.kv_heads, r.head_dim = a.head_dim, r.capacity = a.capacity;
  r.pos0 = a.pos0, r.eps = kTestEps, r.theta = kTestTheta;
  return r;
}

KernelFamily make_decode_rope(const KernelFamily& base) {
  KernelFamily f = base;
  f.name = "attention_decode_rope";
  f.op = "rope_attention_decode";
  f.summary = "attention_decode with the token's q/k RMSNorm, NeoX RoPE and KV-cache write in the same launch: each "
              "block rotates its query heads, the block holding the last row writes the new key and value";
  f.scalars = {{"eps", DType::F32, kTestEps}, {"theta", DType::F32, kTestTheta}};
  f.model_shapes = nullptr;
  f.kernels = [](const Point& p) { return std::vector<std::string>{decode_kernel(p, true)}; };
  f.plan = [base](const Point& p, const Shape& shape) {
    const AttentionProblem a = problem(shape);
    LaunchPlan plan = base.plan(p, shape);
    for (BufferSpec& b : plan.buffers)
      if (b.name == "k_cache" || b.name == "v_cache") b.role = Role::InOut;
    plan.buffers.push_back({"k", DType::F16, a.kv_heads * a.head_dim, Role::Input});
    plan.buffers.push_back({"v", DType::F16, a.kv_heads * a.head_dim, Role::Input});
    plan.buffers.push_back({"q_norm", DType::F32, a.head_dim, Role::Input});
    plan.buffers.push_back({"k_norm", DType::F32, a.head_dim, Role::Input});
    Launch& l = plan.launches.front();
    l.kernel = decode_kernel(p, true);
    l.args.resize(l.args.size() - 6);
    l.args.insert(l.args.end(), {KernelArg::buf("k"), KernelArg::buf("v"), KernelArg::buf("q_norm"),
                                 KernelArg::buf("k_norm"), KernelArg::scalar("eps"), KernelArg::scalar("theta")});
    return plan;
  };
  // The context before the token as attention's inputs (rows from pos0 on NaN: the token's own row must be
  // written before it is read), and the token's raw projections and norm weights as qk_norm_rope_kv's.
  f.make_inputs = [](const Shape& shape, uint64_t seed) {
    const AttentionProblem a = problem(shape);
    HostBuffers in = make_attention_inputs(shape, seed);
    std::vector<uint16_t> k = from_bytes<uint16_t>(in.at("k_cache")), v = from_bytes<uint16_t>(in.at("v_cache"));
    const int64_t kvd = a.kv_heads * a.head_dim;
    for (int64_t i = a.pos0 * kvd; i < (a.pos0 + 1) * kvd; ++i) k[size_t(i)] = v[size_t(i)] = uint16_t(0x7E00);
    in["k_cache"] = bytes_of(k);
    in["v_cache"] = bytes_of(v);
    Rng rng(seed ^ 0x726f7065ull);
    auto random = [&](int64_t n, double lo, double hi) {
      std::vector<uint16_t> x(static_cast<size_t>(n));
      for (uint16_t& e : x) e = float_to_half_bits(float(lo + (hi - lo) * rng.uniform()));
      return x;
    };
    in["q"] = bytes_of(random(a.heads * a.head_dim, -4, 4));
    in["k"] = bytes_of(random(kvd, -4, 4));
    in["v"] = bytes_of(random(kvd, -1, 1));
    // Norm weights in [2.5, 4): the rotated q and k (RMS 1 times the weight) give scores of a spread of several
    // units, so one key dominates a row and a wrong rotation moves the output by about |v| (at weights near 1
    // the softmax averages hundreds of keys, and a query rotated to the next position's angles passed).
    std::vector<float> qn(static_cast<size_t>(a.head_dim)), kn(static_cast<size_t>(a.head_dim));
    for (float& w : qn) w = float(2.5 + 1.5 * rng.uniform());
    for (float& w : kn) w = float(2.5 + 1.5 * rng.uniform());
    in["q_norm"] = bytes_of(qn);
    in["k_norm"] = bytes_of(kn);
    in["locks"] = std::vector<uint8_t>(size_t(a.kv_heads) * 4, 0);
    return in;
  };
  // qk_norm_rope_kv's reference, its q and new row rounded to fp16 as that kernel stores them, then attention's.
  // The kernel's q and k may differ from those by an fp16 ulp (its own order of the sums of squares), which
  // moves a score by up to 2 * 2^-10 of its largest |q||k| sum: the output's tolerance widens by the softmax's
  // factor for that. The written rows are held to qk_norm_rope_kv's own tolerance.
  f.reference = [](const Shape& shape, const HostBuffers& in) {
    const AttentionProblem a = problem(shape);
    const rope_kv::RopeProblem rp = rope_problem(shape);
    const rope_kv::RopeResult r = rope_kv::reference_qk_norm_rope_kv(
        rp, from_bytes<uint16_t>(in.at("q")), from_bytes<uint16_t>(in.at("k")), from_bytes<uint16_t>(in.at("v")),
        from_bytes<float>(in.at("q_norm")), from_bytes<float>(in.at("k_norm")), from_bytes<uint16_t>(in.at("k_cache")),
        from_bytes<uint16_t>(in.at("v_cache")));
    auto halves = [](const std::vector<double>& v) {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half_bits(float(v[i]));
      return h;
    };
    HostBuffers rotated = in;
    rotated["q"] = bytes_of(halves(r.q_out));
    rotated["k_cache"] = bytes_of(halves(r.k_cache));
    rotated["v_cache"] = bytes_of(halves(r.v_cache));
    Expected out = expected_attention(shape, rotated, /*p_in_fp16=*/true);
    const AttentionResult ar = reference_attention(a, halves(r.q_out), halves(r.k_cache), halves(r.v_cache));
    out.abs_tol += ar.max_abs_v * 2.0 * std::ldexp(1.0, -9) * ar.max_score;
    // The cache through the token's row (rows past it are NaN in the inputs and untouched).
    const int64_t rows = (a.pos0 + 1) * a.kv_heads * a.head_dim;
    auto cache = [&](const char* name, const std::vector<double>& values) {
      Expected e;
      e.buffer = name;
      e.values.assign(values.begin(), values.begin() + rows);
      e.abs_tol = r.max_pair * (std::ldexp(1.0, -20) * double(a.pos0 + 1) + std::ldexp(1.0, -18));
      e.rel_tol = std::ldexp(1.0, -10);
      return e;
    };
    Expected locks;
    locks.buffer = "locks";
    locks.values.assign(size_t(a.kv_heads), 0.0f);
    return std::vector<Expected>{out, cache("k_cache", r.k_cache), cache("v_cache", r.v_cache), locks};
  };
  return f;
}

}  // namespace

int64_t splits_for_context(int64_t tokens, int64_t kv_heads) {
  int64_t splits = 1;
  while (splits * 2 <= kMaxDefaultSplits && kv_heads * splits * 2 <= kDefaultBlocks &&
         splits * 2 * kMinTokensPerSplit <= tokens)
    splits *= 2;
  return splits;
}

int64_t decode_smem_bytes(const Point& p, int64_t heads_per_kv, int64_t head_dim) {
  // The last split block's weights for the combine: R x splits, and R sums (attn_decode::combine_splits).
  const int64_t combine = p.at("splits") > 1 ? (heads_per_kv * p.at("splits") + heads_per_kv) * 4 : 0;
  // The ring, the 16 query rows in fp16 and the R rows in fp32.
  if (on_tensor_cores(p))
    return mma_ring_bytes(p, heads_per_kv, head_dim) + 16 * row_stride(head_dim) * 2 + heads_per_kv * head_dim * 4 +
           combine;
  const int64_t tile = p.at("tile"), stages = p.at("stages");
  const int64_t kv = 2 * stages * tile * row_stride(head_dim) * 2;
  const int64_t floats = heads_per_kv * head_dim + heads_per_kv * tile +
                         accumulator_floats(p.at("threads"), heads_per_kv, head_dim) + 3 * heads_per_kv;
  return kv + floats * 4 + combine;
}

const KernelFamily& decode_family() {
  static const KernelFamily f = make_decode();
  return f;
}

const KernelFamily& decode_rope_family() {
  static const KernelFamily f = make_decode_rope(decode_family());
  return f;
}

}  // namespace qt::kernels::attention
