#include <string>

#include "kernels_src/attention/attention_family.h"
#include "kernels_src/attention/attention_problem.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::attention {
namespace {

using Role = BufferSpec::Role;

constexpr int64_t kMaxSmem = 227 * 1024;  // the largest opt-in dynamic shared memory of any target (sm_90)

std::string decode_kernel(const Point& p) {
  return name_expr("attention_decode_kernel", {p.at("threads"), p.at("tile"), p.at("stages")});
}

// Mirrors attn_decode::row_stride and token_groups in attention_decode.cuh.
int64_t row_stride(int64_t d) { return (d / 8) % 2 == 1 ? d : d + 8; }
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
  // The first default is the untuned fallback at the shapes defaults_for has no rule for; the fourth is the
  // longest context's split count, verified in CI like the others (the split count is a launch's grid, not code).
  f.defaults = {{{"threads", 128}, {"tile", 32}, {"stages", 2}, {"splits", 8}},
                {{"threads", 256}, {"tile", 64}, {"stages", 2}, {"splits", 1}},
                {{"threads", 64}, {"tile", 16}, {"stages", 3}, {"splits", 4}},
                {{"threads", 128}, {"tile", 32}, {"stages", 2}, {"splits", kMaxDefaultSplits}}};
  // Untuned, the split count follows the context: the grid is KV heads x splits blocks, and a fixed 8 splits
  // put 64 blocks of the Qwen3-8B shape (8 KV heads) on a 132-SM H200, each streaming its share of the cache
  // with one tile pair in flight: the static model gives 9% of the measured bandwidth at 32K tokens (386 us a
  // layer), against 64% with 64 splits (54 us). So: splits_for_context's count first, then the fixed defaults.
  f.defaults_for = [defaults = f.defaults](const Shape& s) {
    const AttentionProblem a = problem(s);
    Point first = defaults[0];
    first["splits"] = splits_for_context(a.pos0 + a.m, a.kv_heads);
    std::vector<Point> d = {first};
    for (const Point& p : defaults)
      if (p != first) d.push_back(p);
    return d;
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
              KernelArg::i32(a.capacity)};
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
    return std::vector<Expected>{expected_attention(shape, in, /*p_in_fp16=*/false), locks};
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

}  // namespace

int64_t splits_for_context(int64_t tokens, int64_t kv_heads) {
  int64_t splits = 1;
  while (splits * 2 <= kMaxDefaultSplits && kv_heads * splits * 2 <= kDefaultBlocks &&
         splits * 2 * kMinTokensPerSplit <= tokens)
    splits *= 2;
  return splits;
}

int64_t decode_smem_bytes(const Point& p, int64_t heads_per_kv, int64_t head_dim) {
  const int64_t tile = p.at("tile"), stages = p.at("stages");
  const int64_t kv = 2 * stages * tile * row_stride(head_dim) * 2;
  const int64_t floats = heads_per_kv * head_dim + heads_per_kv * tile +
                         accumulator_floats(p.at("threads"), heads_per_kv, head_dim) + 3 * heads_per_kv;
  return kv + floats * 4;
}

const KernelFamily& decode_family() {
  static const KernelFamily f = make_decode();
  return f;
}

}  // namespace qt::kernels::attention
