// moe_gate_up.<type> and moe_down.<type>: the grouped expert GEMMs (moe_grouped.cuh), one family per op and
// stored weight format. A plan is the block alignment for the point's BLOCK_M (moe_place_kernel), the grouped
// GEMM, and the split-k reduction when K is split.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>

#include "common/error.h"
#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/gate_up/gate_up_family.h"
#include "kernels_src/moe/moe_family.h"
#include "kernels_src/moe/moe_family_util.h"
#include "kernels_src/moe/moe_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::moe {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"T", "E", "TOPK", "N", "K", "G"};
constexpr int64_t kMaxSmem = 96 * 1024;

struct Format {
  std::string name;  // family suffix
  WeightType type;
  int code;          // moe_grouped.cuh's FMT
  bool trtllm;
};

const std::vector<Format>& formats() {
  static const std::vector<Format> f = {{"q8_0", WeightType::Q8_0, 0, false},
                                        {"int8_sym", WeightType::INT8_GW_SYM, 1, false},
                                        {"int8_asym", WeightType::INT8_GW_ASYM, 2, false},
                                        {"awq_int4", WeightType::AWQ_INT4, 3, false},
                                        {"int8_sym.trtllm", WeightType::INT8_GW_SYM, 4, true},
                                        {"int8_asym.trtllm", WeightType::INT8_GW_ASYM, 5, true}};
  return f;
}

// One expert's matrix at a shape, for array sizes.
QTensor expert_shape(const Format& fmt, const Shape& s) {
  QTensor t;
  t.type = fmt.type;
  t.rows = s["N"], t.cols = s["K"], t.group_size = int32_t(s["G"]);
  return t;
}

// The kernel's three weight pointers (q, scales, zeros) by array name; formats without zeros repeat scales.
std::vector<std::string> kernel_arrays(const Format& fmt) {
  if (fmt.type == WeightType::AWQ_INT4) return {"qweight", "scales", "qzeros"};
  if (fmt.type == WeightType::INT8_GW_ASYM) return {"q", "scales", "zeros"};
  return {"q", "scales", "scales"};
}

std::string gemm_kernel(const Format& fmt, bool fused, const Point& p) {
  return name_expr("moe_grouped_kernel",
                   {fmt.code, fused ? 1 : 0, p.at("bm"), p.at("bn"), p.at("bk"), p.at("warps"), p.at("stages")});
}
constexpr int64_t kPlaceWarps = 4;  // the alignment launch each plan starts with
const std::string kFusedReduce = "gate_up_reduce_kernel<256>";

int64_t smem_bytes(const Point& p, bool fused) {
  return 2 * (p.at("bm") + (fused ? 2 : 1) * p.at("bn")) * (p.at("bk") + 8) * 2;
}

// 32-bit registers one thread holds for a weight tile's codes (moe_grouped.cuh's units).
int64_t code_registers(const Format& fmt, const Point& p) {
  const int64_t elems = p.at("bn") * p.at("bk"), threads = 32 * p.at("warps");
  const int64_t per_unit = fmt.type == WeightType::Q8_0 ? 8 : fmt.trtllm ? 16 : fmt.type == WeightType::AWQ_INT4 ? 8 : 4;
  return cdiv(elems / per_unit, threads) * (fmt.type == WeightType::Q8_0 ? 2 : fmt.trtllm ? 4 : 1);
}

std::string point_check(const Format& fmt, const Point& p, bool fused) {
  const int64_t mats = fused ? 2 : 1, bm = p.at("bm"), wn = p.at("bn") / p.at("warps");
  if (mats * code_registers(fmt, p) > 32) return std::string("more than 32 registers of prefetched weight codes");
  if (wn < 8 || wn % 8) return "each warp needs whole 8-column fragments (bn / warps = " + std::to_string(wn) + ")";
  if (bm >= 16) {
    if (p.at("bn") % 64) return std::string("tensor-core tiles take bn 64 or 128");
    if (mats * (bm / 16) * (wn / 8) * 4 > 128) return std::string("more than 128 fp32 accumulators per thread");
  } else if (mats * bm * wn > 64) {
    return std::string("more than 64 fp32 accumulators per lane");
  }
  if (smem_bytes(p, fused) > kMaxSmem) return std::string("shared memory above 96 KiB");
  return std::string();
}

std::string shape_check(const Format& fmt, const Point& p, const Shape& s) {
  for (const char* d : {"T", "E", "TOPK", "N", "K", "G"})
    if (s[d] < 1) return std::string("T, E, TOPK, N, K and G must be positive");
  const int64_t n = s["N"], k = s["K"], g = s["G"], count = s["T"] * s["TOPK"];
  if (s["TOPK"] > s["E"]) return std::string("TOPK exceeds E");
  if (s["E"] > 1024) return std::string("E exceeds 1024 (the alignment's shared histogram)");
  if (k % 8) return std::string("K must be a multiple of 8 (16-byte activation rows)");
  if (k % g) return std::string("K must be a multiple of the group size G");
  if (fmt.type == WeightType::Q8_0 && g % 8) return std::string("Q8_0 groups must be multiples of 8");
  if (fmt.type == WeightType::AWQ_INT4 && n % 8) return std::string("N must be a multiple of 8 (packed words)");
  if (!fmt.trtllm && fmt.type != WeightType::Q8_0 && n % 4) return std::string("N must be a multiple of 4");
  if (fmt.trtllm && (k % 64 || n % 32 || g % 16))
    return std::string("the TensorRT-LLM layout needs K % 64 == 0, N % 32 == 0 and G % 16 == 0");
  if (count * std::max(n, k) > INT32_MAX || align_capacity(count, s["E"], p.at("bm")) > INT32_MAX)
    return std::string("too many routed rows for 32-bit indices");
  if (p.at("split_k") > cdiv(k, p.at("bk"))) return std::string("split_k exceeds the number of K tiles");
  return std::string();
}

// Random weights of E experts in the format's storage, scaled so outputs stay O(1): Q8_0 and INT8 codes over
// the whole range with scales in [0.0005, 0.002) (INT8 asym zeros within +-0.01), AWQ nibbles with scales in
// [0.001, 0.004). The TensorRT-LLM formats store the INT8 codes in that layout.
void add_weights(const Format& fmt, const Shape& s, const std::string& prefix, Rng& rng, HostBuffers& in) {
  const int64_t e = s["E"], n = s["N"], k = s["K"];
  const QTensor shape = expert_shape(fmt, s);
  for (const ArraySpec& spec : weight_traits(fmt.type).array_specs()) {
    const std::string name = weight_array_name(spec.array);
    const uint64_t per = shape.array_bytes(spec);
    std::vector<uint8_t> b(per * uint64_t(e));
    if (spec.array == WeightArray::Scales || spec.array == WeightArray::Zeros) {
      const bool f32 = weight_traits(fmt.type).scale == ScaleType::F32 && spec.array == WeightArray::Scales;
      const double lo = spec.array == WeightArray::Zeros ? -0.01 : fmt.type == WeightType::AWQ_INT4 ? 0.001 : 0.0005;
      const double hi = spec.array == WeightArray::Zeros ? 0.01 : fmt.type == WeightType::AWQ_INT4 ? 0.004 : 0.002;
      for (size_t i = 0; i < b.size() / (f32 ? 4 : 2); ++i) {
        const float v = float(lo + (hi - lo) * rng.uniform());
        if (f32) {
          std::memcpy(b.data() + 4 * i, &v, 4);
        } else {
          const uint16_t h = float_to_half_bits(v);
          std::memcpy(b.data() + 2 * i, &h, 2);
        }
      }
    } else {
      rng.fill_bytes(b.data(), b.size());
      if (fmt.trtllm) {
        for (int64_t x = 0; x < e; ++x) {
          const auto t = trtllm_int8_layout(b.data() + per * uint64_t(x), k, n);
          std::copy(t.begin(), t.end(), b.begin() + int64_t(per) * x);
        }
      }
    }
    in[prefix + name] = std::move(b);
  }
}

// Expert e's view over the input buffers; TensorRT-LLM codes are first brought back to the plain layout.
QTensor expert_view(const Format& fmt, const Shape& s, const HostBuffers& in, const std::string& prefix, int64_t e,
                    std::vector<uint8_t>& plain) {
  QTensor t = expert_shape(fmt, s);
  for (const ArraySpec& spec : weight_traits(fmt.type).array_specs()) {
    const uint64_t per = t.array_bytes(spec);
    const uint8_t* base = in.at(prefix + weight_array_name(spec.array)).data() + per * uint64_t(e);
    if (fmt.trtllm && spec.array == WeightArray::Q) {
      plain.resize(per);
      for (int64_t kk = 0; kk < s["K"]; ++kk)
        for (int64_t c = 0; c < s["N"]; ++c) plain[size_t(kk * s["N"] + c)] = base[trtllm_int8_offset(kk, c, s["K"])];
      base = plain.data();
    }
    t.set_array(spec.array, base);
  }
  return t;
}

KernelFamily make(const Format& fmt, bool fused) {
  KernelFamily f;
  const std::string op = fused ? "moe_gate_up" : "moe_down";
  f.name = op + "." + fmt.name;
  f.op = fmt.trtllm ? op + ".trtllm" : op;
  f.weight_types = {fmt.type};
  f.dtypes = linear_dtypes(fmt.type, DType::F16, DType::F16) + (fmt.trtllm ? "(trtllm)" : "");
  f.dims = kDims;
  f.source = "moe/moe_grouped.cuh";
  f.source_hash = kFamilySourceHash;
  f.summary = std::string(fused ? "grouped gate+up GEMM of all experts, SwiGLU epilogue" : "grouped down GEMM of all experts") +
              ", " + fmt.name + " weights: blocks of BM routed rows per expert; BM < 16 on FMA pipes (decode GEMV), "
              "else mma.m16n8k16";
  f.params = {{"bm", {1, 2, 4, 8, 16, 32, 64, 128}, 16, "routed rows per block (each expert padded to it)"},
              {"bn", {32, 64, 128}, 64, "output columns per block"},
              {"bk", {64, 128}, 64, "K per pipeline stage"},
              {"warps", {2, 4, 8}, 4, "warps per block, side by side along N"},
              {"split_k", {1, 2, 4}, 1, "blocks along K (fp32 partials + a reduction launch when > 1)"},
              {"stages", {1, 2}, 2, "2: the next K tile's weight codes are loaded while this one multiplies"}};
  const Point decode = {{"bm", 1}, {"bn", 64}, {"bk", 64}, {"warps", 4}, {"split_k", 1}, {"stages", 2}};
  const Point small = {{"bm", 16}, {"bn", 64}, {"bk", 64}, {"warps", 4}, {"split_k", 2}, {"stages", 1}};
  const Point large = {{"bm", 64}, {"bn", 64}, {"bk", 64}, {"warps", 4}, {"split_k", 1}, {"stages", 2}};
  f.defaults = {decode, small, large};
  // Untuned: one row per block while experts see about one token, then 16-row tensor-core tiles, 64-row ones.
  f.defaults_for = [all = f.defaults, small, large](const Shape& s) {
    return moe::grouped_defaults_for(s, small, large, all);
  };
  f.point_constraint = [fmt, fused](const Point& p) { return point_check(fmt, p, fused); };
  f.shape_constraint = [fmt](const Point& p, const Shape& s) { return shape_check(fmt, p, s); };
  f.kernels = [fmt, fused](const Point& p) {
    std::vector<std::string> k = {place_kernel(kPlaceWarps), gemm_kernel(fmt, fused, p)};
    if (p.at("split_k") > 1) k.push_back(fused ? kFusedReduce : kSplitkReduce);
    return k;
  };
  f.plan = [fmt, fused](const Point& p, const Shape& s) {
    const int64_t t = s["T"], e = s["E"], n = s["N"], k = s["K"], count = t * s["TOPK"], bm = p.at("bm");
    const int64_t cap = align_capacity(count, e, bm), split = p.at("split_k"), mats = fused ? 2 : 1;
    LaunchPlan plan;
    plan.buffers = {{"x", DType::F16, (fused ? t : count) * k, Role::Input}, {"ids", DType::I32, count, Role::Input}};
    const QTensor shape = expert_shape(fmt, s);
    const std::vector<std::string> prefixes = fused ? std::vector<std::string>{"gate_", "up_"} : std::vector<std::string>{""};
    for (const std::string& prefix : prefixes)
      for (const ArraySpec& spec : weight_traits(fmt.type).array_specs())
        plan.buffers.push_back({prefix + weight_array_name(spec.array), DType::U8,
                                int64_t(shape.array_bytes(spec)) * e, Role::Input});
    const std::string out = fused ? "h" : "y";
    plan.buffers.push_back({out, DType::F16, count * n, Role::Output});
    plan.buffers.push_back({"sorted", DType::I32, cap, Role::Workspace});
    plan.buffers.push_back({"position", DType::I32, count, Role::Workspace});
    plan.buffers.push_back({"block_expert", DType::I32, cap / bm, Role::Workspace});
    plan.buffers.push_back({"total", DType::I32, 1, Role::Workspace});
    plan.buffers.push_back({"ws", DType::F32, split > 1 ? split * mats * count * n : 1, Role::Workspace});

    PlaceBuffers pb;
    pb.sorted = "sorted", pb.position = "position", pb.block_expert = "block_expert", pb.total = "total";
    const Launch place = place_launch(kPlaceWarps, pb, count, e, 0, e, bm, cap, count);
    Launch gemm;
    gemm.kernel = gemm_kernel(fmt, fused, p);
    gemm.grid.x = uint32_t(cdiv(n, p.at("bn")));
    gemm.grid.y = uint32_t(cap / bm);
    gemm.grid.z = uint32_t(split);
    gemm.block.x = uint32_t(32 * p.at("warps"));
    gemm.dynamic_smem = smem_bytes(p, fused);
    gemm.args = {KernelArg::buf("x"), KernelArg::buf("sorted"), KernelArg::buf("block_expert"), KernelArg::buf("total")};
    for (size_t m = 0; m < 2; ++m)
      for (const std::string& a : kernel_arrays(fmt)) gemm.args.push_back(KernelArg::buf(prefixes[std::min(m, prefixes.size() - 1)] + a));
    gemm.args.insert(gemm.args.end(), {KernelArg::buf(out), KernelArg::buf("ws"), KernelArg::i32(count),
                                       KernelArg::i32(fused ? s["TOPK"] : 1), KernelArg::i32(n), KernelArg::i32(k),
                                       KernelArg::i32(s["G"])});
    plan.launches = {place, gemm};
    if (split > 1) {
      Launch r = splitk_reduce_launch(count * n, split);
      if (fused) r.kernel = kFusedReduce;
      r.args[1] = KernelArg::buf(out);
      plan.launches.push_back(r);
    }
    return plan;
  };
  set_grouped_bytes(f, /*x_in_flight=*/true);
  set_tiled_main_loop(f, [](const Point& p, const Shape& s) {
    return expected_row_blocks(s["T"], s["E"], s["TOPK"], p.at("bm"));
  });
  f.make_inputs = [fmt, fused](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    const int64_t rows = fused ? s["T"] : s["T"] * s["TOPK"];
    std::vector<uint16_t> x(size_t(rows * s["K"]));
    for (auto& v : x) v = float_to_half_bits(float(2.0 * rng.uniform() - 1.0));
    HostBuffers in{{"x", bytes_of(x)}, {"ids", bytes_of(routed_ids(s["T"], s["TOPK"], s["E"], int((seed + 2) % 3), rng))}};
    if (fused) {
      add_weights(fmt, s, "gate_", rng, in);
      add_weights(fmt, s, "up_", rng, in);
    } else {
      add_weights(fmt, s, "", rng, in);
    }
    return in;
  };
  // The kernel rounds each dequantized weight to fp16 once (2^-11 of |w|) and sums in fp32.
  f.reference = [fmt, fused](const Shape& s, const HostBuffers& in) {
    const int64_t n = s["N"], k = s["K"], count = s["T"] * s["TOPK"];
    const auto x = from_bytes<uint16_t>(in.at("x"));
    const auto ids = from_bytes<int32_t>(in.at("ids"));
    const double a = std::ldexp(1.0, -11) + gate_up::fp32_sum_error(k);
    std::vector<uint8_t> plain;
    gate_up::Projections p;
    std::vector<double> y(static_cast<size_t>(n)), y_abs(static_cast<size_t>(n));
    for (int64_t i = 0; i < count; ++i) {
      const uint16_t* row = x.data() + (fused ? i / s["TOPK"] : i) * k;
      for (const std::string& prefix : fused ? std::vector<std::string>{"gate_", "up_"} : std::vector<std::string>{""}) {
        expert_row(expert_view(fmt, s, in, prefix, ids[size_t(i)], plain), row, n, y.data(), y_abs.data());
        auto& out = prefix == "up_" ? p.u : p.g;
        auto& out_abs = prefix == "up_" ? p.u_abs : p.g_abs;
        out.insert(out.end(), y.begin(), y.end());
        out_abs.insert(out_abs.end(), y_abs.begin(), y_abs.end());
      }
    }
    if (fused) return std::vector<Expected>{gate_up::swiglu_expected(p, a)};
    Expected e;
    e.buffer = "y";
    double tol = 0;
    for (size_t i = 0; i < p.g.size(); ++i) e.values.push_back(float(p.g[i])), tol = std::max(tol, a * p.g_abs[i]);
    e.abs_tol = tol + 1e-6;
    e.rel_tol = std::ldexp(1.0, -10);
    return std::vector<Expected>{e};
  };
  f.model_shapes = [fmt, fused](const ModelConfig& c, const ModelWeights* w) {
    std::vector<Shape> out;
    if (!c.is_moe() || fmt.trtllm != false) return out;
    const ExpertStack* stack = w && !w->layers.empty() ? &w->layers[0].expert_w1 : nullptr;
    if (stack && (stack->empty() || stack->base.type != fmt.type)) return out;
    const int64_t g = stack ? stack->base.group_size : c.group_size > 0 ? c.group_size : 64;
    const int64_t n = fused ? c.hidden_dim : c.dim, k = fused ? c.dim : c.hidden_dim;
    for (int64_t t : token_buckets()) {
      const int64_t per = std::max<int64_t>(1, t * c.num_experts_per_tok / c.num_experts);
      out.push_back(Shape{kDims, {t, c.num_experts, c.num_experts_per_tok, n, k, g},
                          std::string(fused ? "expert.w1+w3" : "expert.w2") + " T=" + std::to_string(t) + " (~" +
                              std::to_string(per) + " rows/expert)"});
    }
    return out;
  };
  const int64_t g = fmt.type == WeightType::AWQ_INT4 || fmt.trtllm ? 32 : 64;
  f.probe_shape = Shape{kDims, {256, 128, 8, fused ? 768 : 2048, fused ? 2048 : 768, 128}, "probe"};
  f.test_shapes = {Shape{kDims, {3, 8, 2, fused ? 64 : 128, fused ? 128 : 64, g}, "tiny golden MoE, 3 tokens"},
                   Shape{kDims, {1, 128, 8, fused ? 96 : 128, 256, g}, "decode: one token over 128 experts"},
                   Shape{kDims, {40, 8, 3, 64, 192, g}, "prefill: 40 tokens, ~15 rows per expert, 3 K tiles"}};
  return f;
}

}  // namespace

const std::vector<const KernelFamily*>& grouped_families() {
  static const std::deque<KernelFamily> all = two_per_format(formats(), make);
  static const std::vector<const KernelFamily*> f = family_pointers(all);
  return f;
}

const KernelFamily& grouped_family(const std::string& op, WeightType t) {
  for (const KernelFamily* f : grouped_families())
    if (f->op == op && f->serves(t)) return *f;
  throw Error("no grouped MoE family for op " + op + " and " + weight_type_name(t) + " weights");
}

}  // namespace qt::kernels::moe
