#include <string>

#include "kernels_src/attention/attention_family.h"
#include "kernels_src/attention/attention_problem.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::attention {
namespace {

constexpr int64_t kMaxSmem = 227 * 1024;  // the largest opt-in dynamic shared memory of any target (sm_90)

std::string prefill_kernel(const Point& p) {
  return name_expr("attention_prefill_kernel", {p.at("bm"), p.at("bn"), p.at("warps"), p.at("stages"), p.at("dmax")});
}

KernelFamily make_prefill() {
  KernelFamily f;
  f.name = "attention_prefill";
  f.op = "attention_prefill";
  f.dtypes = "f16->f16";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "attention/attention_prefill.cuh";
  f.summary = "causal flash attention: ldmatrix + mma.m16n8k16, fp32 online softmax, cp.async K/V pipeline";
  f.min_sm = 80;
  f.params = {{"bm", {16, 32, 64, 128}, 128, "query rows per block"},
              {"bn", {32, 64, 128}, 32, "keys per tile"},
              {"warps", {1, 2, 4, 8}, 8, "warps per block, each BM/warps query rows"},
              {"stages", {2, 3}, 2, "cp.async pipeline stages of K/V tiles"},
              {"dmax", {64, 128}, 128, "largest head dim (sizes the accumulators and shared-memory rows)"}};
  // The first default is the untuned fallback for Qwen3's D = 128: 8 warps share each K/V tile, and 70 KB of
  // shared memory leave room for 2 blocks per SM on sm_80, 3 on sm_90.
  f.defaults = {{{"bm", 128}, {"bn", 32}, {"warps", 8}, {"stages", 2}, {"dmax", 128}},
                {{"bm", 32}, {"bn", 64}, {"warps", 2}, {"stages", 3}, {"dmax", 64}},
                {{"bm", 32}, {"bn", 32}, {"warps", 1}, {"stages", 2}, {"dmax", 64}}};
  f.point_constraint = [](const Point& p) {
    const int64_t bm = p.at("bm"), warps = p.at("warps");
    if (bm % (16 * warps)) return std::string("each warp needs whole 16-row fragments");
    const int64_t mf = bm / (16 * warps);
    if (mf > 2) return std::string("more than 2 row fragments per warp");
    // Beyond 160 the kernel cannot stay spill-free; up to it, ptxas decides (spilling points are pruned).
    if (mf * (p.at("bn") / 8 + p.at("dmax") / 8) * 4 > 160)
      return std::string("more than 160 fp32 accumulators (scores + output) per thread");
    if (prefill_smem_bytes(p) > kMaxSmem) return std::string("more than 227 KiB of shared memory");
    return std::string();
  };
  f.shape_constraint = [](const Point& p, const Shape& shape) {
    const AttentionProblem a = problem(shape);
    std::string e = shape_check(a);
    if (e.empty() && a.head_dim > p.at("dmax")) e = "head dim D exceeds dmax=" + std::to_string(p.at("dmax"));
    return e;
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{prefill_kernel(p)}; };
  f.plan = [](const Point& p, const Shape& shape) {
    const AttentionProblem a = problem(shape);
    LaunchPlan plan;
    plan.buffers = attention_buffers(a);
    Launch l;
    l.kernel = prefill_kernel(p);
    l.grid.x = static_cast<uint32_t>(cdiv(a.m, p.at("bm")));
    l.grid.y = static_cast<uint32_t>(a.heads);
    l.block.x = static_cast<uint32_t>(32 * p.at("warps"));
    l.dynamic_smem = prefill_smem_bytes(p);
    l.args = {KernelArg::buf("q"),     KernelArg::buf("k_cache"), KernelArg::buf("v_cache"),
              KernelArg::buf("pos"),   KernelArg::buf("out"),     KernelArg::i32(a.m),
              KernelArg::i32(a.heads), KernelArg::i32(a.kv_heads), KernelArg::i32(a.head_dim),
              KernelArg::i32(a.capacity)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = make_attention_inputs;
  f.reference = [](const Shape& shape, const HostBuffers& in) {
    return std::vector<Expected>{expected_attention(shape, in, /*p_in_fp16=*/true)};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) { return prefill_model_shapes(c); };
  // D = 64 so that every point (dmax 64 or 128) accepts it; shared memory does not depend on D.
  f.probe_shape = Shape{kDims, {512, 32, 8, 64, 4096, 0}, "probe: 512 tokens, Qwen3-8B heads at D=64"};
  f.test_shapes = {Shape{kDims, {40, 4, 2, 128, 64, 0}, "D=128 (Qwen3), GQA ratio 2, 40 tokens from position 0"},
                   Shape{kDims, {17, 4, 2, 40, 64, 5}, "tiny dense: D=40, 17 tokens after 5 cached"},
                   Shape{kDims, {33, 6, 2, 32, 40, 0}, "D=32, GQA ratio 3, 33 tokens"},
                   Shape{kDims, {1, 3, 1, 48, 128, 100}, "D=48, one token after 100 cached"},
                   Shape{kDims, {70, 2, 1, 40, 100, 30}, "D=40, 70 tokens after 30: tails in every tile size"},
                   Shape{kDims, {96, 4, 2, 128, 300, 170}, "D=128, 96 tokens after 170: deep key pipeline"}};
  return f;
}

}  // namespace

int64_t prefill_smem_bytes(const Point& p) {
  const int64_t sd = p.at("dmax") + 8;
  return 2 * sd * (p.at("bm") + 2 * p.at("stages") * p.at("bn"));
}

const KernelFamily& prefill_family() {
  static const KernelFamily f = make_prefill();
  return f;
}

}  // namespace qt::kernels::attention
