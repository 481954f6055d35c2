// moe_gate_up.frag.<type> and moe_down.frag.<type>: the grouped expert GEMMs on Hopper's wgmma (moe_wgmma.cuh).
// A plan is the block alignment for the point's BM (moe_place_kernel), the wgmma GEMM, and the split-K
// reduction when K is split over blocks that are not one cluster (a cluster sums its split itself). The
// problem, its inputs and its reference are the file-layout grouped family's (moe_grouped_family.cpp) with each expert repacked into the frag layout by the CPU reference repack, so both
// generations of grouped kernel answer to one definition.
#include "kernels_src/moe_wgmma/moe_wgmma_family.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include "common/error.h"
#include "common/half.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/fraglinear/frag_wgmma_sizes.h"
#include "kernels_src/moe/moe_family.h"
#include "kernels_src/moe/moe_family_util.h"
#include "kernels_src/moe/moe_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::moe_wgmma {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"T", "E", "TOPK", "N", "K", "G"};
constexpr int64_t kPlaceWarps = 4;  // the alignment launch each plan starts with
const std::string kFusedReduce = "gate_up_reduce_kernel<256>";
const std::string kRef = "ref.";  // the file-layout arrays, kept for the reference only

struct Format {
  std::string name;  // family suffix
  WeightType type;
};
const std::vector<Format>& formats() {
  static const std::vector<Format> f = {
      {"awq_int4", WeightType::AWQ_INT4}, {"int8_sym", WeightType::INT8_GW_SYM}, {"q8_0", WeightType::Q8_0}};
  return f;
}

frag::FragDims dims_of(const Format& fmt, const Shape& s) {
  return {s["N"], s["K"], s["G"], frag::frag_layout_bits(fmt.type)};
}
std::vector<std::string> prefixes(bool fused) {
  return fused ? std::vector<std::string>{"gate_", "up_"} : std::vector<std::string>{""};
}

std::string gemm_kernel(const Format& fmt, bool fused, const Point& p) {
  return name_expr("moe_wgmma_kernel", {frag::frag_layout_bits(fmt.type), fused ? 1 : 0, p.at("bm"), p.at("wg"),
                                        p.at("stages"), p.at("pf"), p.at("kif"), p.at("cluster")});
}

// The deepest weight ring (pf) the fused kernel takes at wg warpgroups and bm rows without spills.
int64_t fused_pf_limit(int64_t wg, int64_t bm) {
  if (wg == 1) return bm <= 8 ? 4 : bm <= 16 ? 2 : 0;
  if (wg == 4 && bm >= 64) return 2;
  return 4;
}

// Each thread holds (4 / wg) accumulators of bm / 2 floats per matrix: at most half of the registers it may
// have (255, or 128 at 512 threads a block), as the dense Hopper GEMM allows.
std::string point_check(const Format& fmt, const Point& p, bool fused) {
  const int64_t acc = (fused ? 2 : 1) * (4 / p.at("wg")) * p.at("bm") / 2;
  const int64_t limit = std::min<int64_t>(255, 65536 / (128 * p.at("wg"))) / 2 + 1;
  if (acc > limit)
    return "bm=" + std::to_string(p.at("bm")) + " with wg=" + std::to_string(p.at("wg")) + " needs " +
           std::to_string(acc) + " accumulator registers per thread, over " + std::to_string(limit);
  // The fused kernel holds two of everything (accumulators, A sets, rings, scales). Where ptxas (NVRTC 13.0,
  // `qtune static --gpu sm90 --points all`) spills, as measured, not by a formula: no linear count of those
  // registers separates the points that fit from those that spill.
  // Without a register ring (pf = 0), one warpgroup's two accumulator sets at bm = 32 still spill with AWQ's
  // zeros beside them (568-632 B); the 8-bit types fit in 252-254 registers.
  if (fused && p.at("pf") == 0 && p.at("wg") == 1 && p.at("bm") >= 32 && fmt.type == WeightType::AWQ_INT4)
    return "the fused AWQ kernel spills at wg=1, bm=" + std::to_string(p.at("bm")) + " even with the weights' shared ring";
  if (fused && p.at("pf") > fused_pf_limit(p.at("wg"), p.at("bm")))
    return "the fused kernel spills at wg=" + std::to_string(p.at("wg")) + ", bm=" + std::to_string(p.at("bm")) +
           " with a ring deeper than " + std::to_string(fused_pf_limit(p.at("wg"), p.at("bm")));
  return frag::wgmma_split_check(p, frag::frag_layout_bits(fmt.type), fused ? 2 : 1);
}

std::string shape_check(const Format& fmt, const Point& p, const Shape& s) {
  for (const char* d : {"T", "E", "TOPK", "N", "K", "G"})
    if (s[d] < 1) return std::string("T, E, TOPK, N, K and G must be positive");
  if (s["TOPK"] > s["E"]) return std::string("TOPK exceeds E");
  if (s["E"] > 1024) return std::string("E exceeds 1024 (the alignment's shared histogram)");
  const frag::FragDims d = dims_of(fmt, s);
  if (std::string e = frag::frag_dims_check(d); !e.empty()) return e;
  const int64_t count = s["T"] * s["TOPK"];
  if (count * std::max(d.n, d.k) > INT32_MAX || moe::align_capacity(count, s["E"], p.at("bm")) > INT32_MAX ||
      d.weight_words() > INT32_MAX)
    return std::string("too many routed rows or weight words for 32-bit indices");
  return frag::wgmma_split_check(p, d);
}

// The file-layout grouped family's inputs with every expert of every matrix repacked: the frag arrays under
// their kernel names, the file arrays under "ref." for the reference. Q8_0's fp32 scales are drawn as fp16
// values here, so the layout's one added rounding (frag_layout.h) is not part of this check; the dense
// q8_0_frag families test that rounding.
HostBuffers frag_inputs(const Format& fmt, bool fused, const KernelFamily& file, const Shape& s, uint64_t seed) {
  HostBuffers in = file.make_inputs(s, seed);
  const frag::FragDims d = dims_of(fmt, s);
  const int64_t experts = s["E"];
  QTensor one;  // one expert's matrix
  one.type = fmt.type, one.rows = d.n, one.cols = d.k, one.group_size = int32_t(d.group);
  for (const std::string& prefix : prefixes(fused)) {
    auto array = [&](WeightArray a) -> std::vector<uint8_t>& { return in.at(prefix + weight_array_name(a)); };
    if (fmt.type == WeightType::Q8_0)
      for (size_t i = 0; i + 4 <= array(WeightArray::Scales).size(); i += 4) {
        float v;
        std::memcpy(&v, array(WeightArray::Scales).data() + i, 4);
        v = round_to_half(v);
        std::memcpy(array(WeightArray::Scales).data() + i, &v, 4);
      }
    std::vector<uint32_t> bq, bz;
    std::vector<uint16_t> bs;
    for (int64_t e = 0; e < experts; ++e) {
      QTensor t = one;  // expert e's view of the arrays
      for (const ArraySpec& spec : weight_traits(fmt.type).array_specs())
        t.set_array(spec.array, array(spec.array).data() + one.array_bytes(spec) * uint64_t(e));
      const frag::FragWeights w = frag::repack(t);
      bq.insert(bq.end(), w.q.begin(), w.q.end());
      bs.insert(bs.end(), w.scales.begin(), w.scales.end());
      bz.insert(bz.end(), w.zeros.begin(), w.zeros.end());
    }
    for (const ArraySpec& spec : weight_traits(fmt.type).array_specs()) {
      const std::string name = prefix + weight_array_name(spec.array);
      in[kRef + name] = std::move(in.at(name));
      in.erase(name);
    }
    in[prefix + "bq"] = bytes_of(bq);
    in[prefix + "bs"] = bytes_of(bs);
    if (!bz.empty()) in[prefix + "bz"] = bytes_of(bz);
  }
  return in;
}

KernelFamily make(const Format& fmt, bool fused) {
  const std::string op = fused ? "moe_gate_up" : "moe_down";
  const KernelFamily& file = moe::grouped_family(op, fmt.type);
  const bool zeros = fmt.type == WeightType::AWQ_INT4;
  KernelFamily f;
  f.name = op + ".frag." + fmt.name;
  f.op = op + ".frag";
  f.weight_types = {fmt.type};
  f.dtypes = file.dtypes + "(frag)";
  f.dims = kDims;
  f.source = "moe_wgmma/moe_wgmma.cuh";
  f.source_hash = kFamilySourceHash;
  f.min_sm = 90;
  f.summary = std::string(fused ? "grouped gate+up GEMM of all experts, SwiGLU in the epilogue"
                                : "grouped down GEMM of all experts") +
              ", " + fmt.name + " experts in the frag layout, on Hopper's wgmma (sm_90a): blocks of BM routed rows "
              "per expert, gathered by the x ring's copies";
  f.params = {{"bm", {8, 16, 32, 64, 128}, 64, "routed rows per block (each expert padded to it): wgmma's N"},
              {"wg", {1, 2, 4}, 1, "warpgroups per block, splitting the 4 fragment pairs of each weight tile"},
              {"stages", {2, 3, 4}, 4, "cp.async stages of x (64 columns of K each)"},
              frag::wgmma_weight_ring_param(),
              frag::wgmma_in_flight_param(),
              {"split", {1, 2, 4}, 1, "blocks along K (fp32 partials + a reduction launch when > 1)"},
              // Points recorded before it (the second H200 run's report) ran no cluster.
              {"cluster", {1, 2, 4}, 1,
               "blocks along K forming one thread block cluster, their partial tiles summed in distributed shared "
               "memory: no workspace, no reduction launch (1: none; with split = 1)", {}, false, /*absent_value=*/1}};
  // As the file-layout family's rule: one expert row per token at decode, where K is split for enough
  // blocks; 16-row blocks while the average expert has fewer than 32 rows; then 64.
  // The weights come through the shared ring (pf = 0): the register ring waits out a DRAM round trip every
  // k-step (frag::wgmma_weight_ring_param).
  const Point decode = {{"bm", 8}, {"wg", 1}, {"stages", 3}, {"pf", 0}, {"kif", 1}, {"split", 4}, {"cluster", 1}};
  const Point small = {{"bm", 16}, {"wg", 1}, {"stages", 3}, {"pf", 0}, {"kif", 1}, {"split", 2}, {"cluster", 1}};
  const Point large = {{"bm", 64}, {"wg", 2}, {"stages", 4}, {"pf", 0}, {"kif", 1}, {"split", 1}, {"cluster", 1}};
  // The decode point's split, summed in a cluster: one launch fewer per grouped GEMM.
  const Point decode_cluster = {{"bm", 8}, {"wg", 1}, {"stages", 3}, {"pf", 0}, {"kif", 1}, {"split", 1}, {"cluster", 4}};
  // The small and large points with two k-steps in flight, last, so that every tune measures that choice beside
  // them (the static model has no term for it).
  Point small_kif2 = small, large_kif2 = large;
  small_kif2["kif"] = large_kif2["kif"] = 2;
  // And on the register ring, the points the H200 runs measured (pf = 2), so that every report times both rings.
  Point small_registers = small, large_registers = large;
  small_registers["pf"] = large_registers["pf"] = 2;
  f.defaults = {decode, small, large, decode_cluster, small_kif2, large_kif2, small_registers, large_registers};
  f.defaults_for = [all = f.defaults, small, large](const Shape& s) {
    return moe::grouped_defaults_for(s, small, large, all);
  };
  f.point_constraint = [fmt, fused](const Point& p) { return point_check(fmt, p, fused); };
  f.shape_constraint = [fmt](const Point& p, const Shape& s) { return shape_check(fmt, p, s); };
  // The weights are the DRAM stream: each warp's ring per matrix, as the dense Hopper GEMM states it.
  f.bytes_in_flight_per_warp = [fmt, fused](const Point& p) {
    return frag::wgmma_weight_bytes_in_flight(p, frag::frag_layout_bits(fmt.type), fused ? 2 : 1);
  };
  // A block's chunks of K: its split's share of the 64-column chunks.
  auto ways = [](const Point& p) { return std::max(p.at("split"), p.at("cluster")); };
  auto chunks_per_block = [fmt, ways](const Point& p, const Shape& s) {
    return cdiv(cdiv(dims_of(fmt, s).k, frag_wgmma::kBK), ways(p));
  };
  f.latency_chain = [chunks_per_block](const Point& p, const Shape& s) {
    return frag::wgmma_weight_ring_chain(p, chunks_per_block(p, s));
  };
  // A chunk of K a trip, as the dense Hopper GEMM's, in the blocks that have routed rows (the routing's expected
  // row blocks, each over every column block and split), not the grid sized for the worst routing: the model's
  // issue time and the register ring's chain both count these.
  f.main_loop = [fmt, ways, chunks_per_block](const Point& p, const Shape& s, const LaunchPlan&) {
    const double blocks = moe::expected_row_blocks(s["T"], s["E"], s["TOPK"], p.at("bm")) *
                          double(cdiv(dims_of(fmt, s).n_tiles(), frag_wgmma::kTiles) * ways(p));
    return LoopWork{blocks, double(chunks_per_block(p, s))};
  };
  f.kernels = [fmt, fused](const Point& p) {
    std::vector<std::string> k = {moe::place_kernel(kPlaceWarps), gemm_kernel(fmt, fused, p)};
    if (p.at("split") > 1) k.push_back(fused ? kFusedReduce : kSplitkReduce);
    return k;
  };
  f.plan = [fmt, fused, zeros](const Point& p, const Shape& s) {
    const frag::FragDims d = dims_of(fmt, s);
    const int64_t t = s["T"], e = s["E"], count = t * s["TOPK"], bm = p.at("bm");
    const int64_t cap = moe::align_capacity(count, e, bm), split = p.at("split"), mats = fused ? 2 : 1;
    const int64_t cluster = p.at("cluster");
    LaunchPlan plan;
    plan.buffers = {{"x", DType::F16, (fused ? t : count) * d.k, Role::Input}, {"ids", DType::I32, count, Role::Input}};
    for (const std::string& prefix : prefixes(fused)) {
      plan.buffers.push_back({prefix + "bq", DType::I32, d.weight_words() * e, Role::Input});
      plan.buffers.push_back({prefix + "bs", DType::F16, d.scale_halves() * e, Role::Input});
      if (zeros) plan.buffers.push_back({prefix + "bz", DType::I32, d.zero_words() * e, Role::Input});
    }
    const std::string out = fused ? "h" : "y";
    plan.buffers.push_back({out, DType::F16, count * d.n, Role::Output});
    plan.buffers.push_back({"sorted", DType::I32, cap, Role::Workspace});
    plan.buffers.push_back({"position", DType::I32, count, Role::Workspace});
    plan.buffers.push_back({"block_expert", DType::I32, cap / bm, Role::Workspace});
    plan.buffers.push_back({"total", DType::I32, 1, Role::Workspace});
    plan.buffers.push_back({"ws", DType::F32, split > 1 ? split * mats * count * d.n : 1, Role::Workspace});

    moe::PlaceBuffers pb;
    pb.sorted = "sorted", pb.position = "position", pb.block_expert = "block_expert", pb.total = "total";
    const Launch place = moe::place_launch(kPlaceWarps, pb, count, e, 0, e, bm, cap, count);
    Launch gemm;
    gemm.kernel = gemm_kernel(fmt, fused, p);
    gemm.grid.x = uint32_t(cdiv(d.n_tiles(), 4));
    gemm.grid.y = uint32_t(cap / bm);
    gemm.grid.z = uint32_t(std::max(split, cluster));
    gemm.cluster.z = uint32_t(cluster);
    gemm.block.x = uint32_t(128 * p.at("wg"));
    gemm.dynamic_smem = frag::wgmma_smem_bytes(p, frag::frag_layout_bits(fmt.type), fused ? 2 : 1);
    gemm.args = {KernelArg::buf("x"), KernelArg::buf("sorted"), KernelArg::buf("block_expert"), KernelArg::buf("total")};
    for (const std::string& prefix : {prefixes(fused).front(), prefixes(fused).back()})
      for (const char* a : {"bq", "bs", "bz"})
        gemm.args.push_back(std::string(a) != "bz" || zeros ? KernelArg::buf(prefix + a) : KernelArg::null());
    gemm.args.insert(gemm.args.end(), {KernelArg::buf(out), KernelArg::buf("ws"), KernelArg::i32(count),
                                       KernelArg::i32(fused ? s["TOPK"] : 1), KernelArg::i32(d.n),
                                       KernelArg::i32(d.k), KernelArg::i32(d.group)});
    plan.launches = {place, gemm};
    if (split > 1) {
      Launch r = splitk_reduce_launch(count * d.n, split);
      if (fused) r.kernel = kFusedReduce;
      r.args[1] = KernelArg::buf(out);
      plan.launches.push_back(r);
    }
    return plan;
  };
  // The ring in flight holds weights only, as the dense Hopper GEMM's.
  moe::set_grouped_bytes(f, /*x_in_flight=*/false);
  f.rereads_at_dram_latency = true;  // measured on these rows (KernelFamily)
  const KernelFamily* src = &file;
  f.make_inputs = [fmt, fused, src](const Shape& s, uint64_t seed) { return frag_inputs(fmt, fused, *src, s, seed); };
  f.reference = [src](const Shape& s, const HostBuffers& in) {
    HostBuffers source{{"x", in.at("x")}, {"ids", in.at("ids")}};
    for (const auto& [name, bytes] : in)
      if (name.rfind(kRef, 0) == 0) source[name.substr(kRef.size())] = bytes;
    return src->reference(s, source);
  };
  f.model_shapes = file.model_shapes;
  f.probe_shape = file.probe_shape;
  f.test_shapes = file.test_shapes;
  const int64_t g = fmt.type == WeightType::AWQ_INT4 ? 32 : 64;
  f.test_shapes.push_back(Shape{kDims, {24, 4, 2, 328, 128, g}, "N=328: two column blocks, the second partial"});
  return f;
}

}  // namespace

const std::vector<const KernelFamily*>& families() {
  static const std::deque<KernelFamily> all = two_per_format(formats(), make);
  static const std::vector<const KernelFamily*> f = family_pointers(all);
  return f;
}

}  // namespace qt::kernels::moe_wgmma
