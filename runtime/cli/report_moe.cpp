#include "runtime/cli/report_moe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>

#include "common/error.h"
#include "common/half.h"
#include "common/rng.h"
#include "device/blas/blas_lt.h"
#include "device/plan/run_plan.h"
#include "kernels_src/activation/swiglu_family.h"
#include "kernels_src/moe/moe_family.h"
#include "kernels_src/moe/moe_reference.h"
#include "kernels_src/moe_stream/moe_stream_family.h"
#include "kernels_src/registry/family_util.h"
#include "kernels_src/registry/registry.h"
#include "runtime/cli/device_timer.h"
#include "runtime/gpu/kernel_choice.h"
#include "runtime/report/report_json.h"

namespace qt::rt {
namespace {

using nlohmann::json;
using kernels::HostBuffers;
using kernels::Shape;
namespace km = kernels::moe;
namespace kms = kernels::moe_stream;

// Seeds: the routing (per bucket: seed + T), the weights (once per op), the activations.
constexpr uint64_t kRoutingSeed = 5, kWeightSeed = 11, kInputSeed = 13;

// The report's own statement of what it measured: rendered with the rows, so a recorded report keeps it.
const char* const kMoeMethod =
    "Routing: each token's top-k experts drawn uniformly and distinct, from a fixed seed (qbench's "
    "seeded_routing), the same routed rows for every variant; not the model's router, because the rows time "
    "kernels, not a model: a seeded routing is the same on any model file, and a uniform one is the balanced "
    "load a trained router is pushed toward (synthetic models' routers are random anyway). Grouped: one plan of "
    "the family as the runtime runs it (its block alignment by expert, the grouped GEMM, the split-K reduction "
    "when split), input x in token order, output in routed-row order; 'frag' rows are the Hopper grouped GEMMs "
    "(wgmma, sm_90a) on the same experts repacked into the frag layout, which the runtime runs only when asked "
    "(qrun --expert-layout frag), so the goals judge the file layout's tuned dispatch. Experts one by one on cuBLASLt: each "
    "expert's weights dequantized to fp16 once, outside the timing; for each expert with rows, gate and up as "
    "two GEMMs (as transformers' Qwen3MoeMLP runs them; one stacked [2*inter] GEMM would need a SwiGLU over "
    "interleaved halves, for which cuBLASLt has no epilogue) into one contiguous gate and one up buffer, then "
    "one SwiGLU launch over all routed rows. The gate/up row's timed region holds the gather of each expert's "
    "rows (moe_init_routing: a stable sort by expert and the row copy), the work the grouped kernel's "
    "alignment does inside its own timing; the down row's input is already grouped by expert (the gate/up "
    "output) and its output may stay so (finalize reads through the scatter index), so it times the GEMMs "
    "alone. In the baseline's favour, each expert's row count is known on the host before the timing (a real "
    "loop over experts waits for it) and no expert with zero rows is launched. 'cublas GEMMs only' is the "
    "gate/up row's GEMMs without gather and SwiGLU: the floor no such loop gets under (the down row's one "
    "by one is its GEMMs alone already). 'routed GEMV' rows (T <= 16) are the experts as qrun --fuse-norm runs "
    "them at decode (kernels_src/moe_stream, frag-layout experts): one launch each, on router logits whose top-k "
    "are the same routed rows; the down row's kernel also weights the rows and adds them into a hidden state "
    "(moe_finalize and the residual add, which the grouped rows leave to another launch). Tuned / best of the "
    "tune: the tuned time here over the fastest verified time qtune stored for the family at that exact shape "
    "(the tuner's timing, also events with the L2 flushed).";

json unavailable(const std::string& name, const std::string& why) { return {{"name", name}, {"unavailable", why}}; }

std::vector<uint16_t> random_halves(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> h(n);
  for (auto& v : h) v = float_to_half_bits(float(2.0 * rng.uniform() - 1.0));
  return h;
}

// One grouped op of the model: its family for the experts' type, and the tuner's shape for it (the family's
// model_shapes, so that the store's results are found under the same dims), T set per bucket.
struct GroupedOp {
  std::string op;
  bool fused;  // gate/up with SwiGLU
  const kernels::KernelFamily* family;
  Shape base;
  WeightType type;
  // The Hopper grouped GEMM of the op and type (op + ".frag", experts repacked into the frag layout, which the
  // runtime loads only when asked: qrun --expert-layout frag), or null when none serves the type.
  const kernels::KernelFamily* frag;
  // The routed streaming GEMV that replaces the op at decode under --fuse-norm, or null, and its shapes' R.
  const kernels::KernelFamily* routed;
  bool renormalize;
};

const kernels::KernelFamily* routed_family(bool fused, WeightType t) {
  const std::string op = fused ? kms::kGateUpOp : kms::kDownResidualOp;
  for (const kernels::KernelFamily* f : kms::families())
    if (f->op == op && f->serves(t)) return f;
  return nullptr;
}

// Router logits [t][E] whose top-k are `ids` in their order: choice j at 4 - j / 4, every other expert at -4.
std::vector<uint16_t> logits_choosing(const std::vector<int32_t>& ids, int64_t t, int64_t experts, int64_t top_k) {
  std::vector<uint16_t> l(size_t(t * experts), float_to_half_bits(-4.0f));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < top_k; ++j)
      l[size_t(r * experts + ids[size_t(r * top_k + j)])] = float_to_half_bits(4.0f - float(j) / 4.0f);
  return l;
}

const kernels::KernelFamily* frag_family(const std::string& op, WeightType t) {
  for (const kernels::KernelFamily* f : kernels::all_families())
    if (f->op == op + ".frag" && f->serves(t)) return f;
  return nullptr;
}

Shape at_tokens(const Shape& base, int64_t t) {
  Shape s = base;
  s.values[0] = t;
  return s;
}

std::vector<GroupedOp> grouped_ops(const ModelWeights& w) {
  std::vector<GroupedOp> ops;
  if (!w.config.is_moe() || w.layers.empty() || w.layers[0].expert_w1.empty()) return ops;
  const WeightType type = w.layers[0].expert_w1.base.type;
  for (const bool fused : {true, false}) {
    const std::string op = fused ? "moe_gate_up" : "moe_down";
    const kernels::KernelFamily& f = km::grouped_family(op, type);
    const std::vector<Shape> shapes = f.model_shapes(w.config, &w);
    if (shapes.empty()) throw Error(f.name + " has no shape for this model");
    Shape base = shapes[0];
    base.label = fused ? "expert.w1+w3 (SwiGLU)" : "expert.w2";
    ops.push_back({op, fused, &f, base, type, frag_family(op, type), routed_family(fused, type),
                   w.config.norm_topk_prob});
  }
  return ops;
}

// Bytes of one expert's matrix in the family's storage.
uint64_t expert_bytes(const GroupedOp& g) {
  QTensor t;
  t.type = g.type, t.rows = g.base["N"], t.cols = g.base["K"], t.group_size = int32_t(g.base["G"]);
  return t.storage_bytes();
}

// Rows each expert gets from routed ids.
std::vector<int64_t> rows_per_expert(const std::vector<int32_t>& ids, int64_t experts) {
  std::vector<int64_t> rows(size_t(experts), 0);
  for (int32_t e : ids) ++rows[size_t(e)];
  return rows;
}

// Every expert's matrix as fp16 [E][N][K], dequantized on the host from the arrays under `prefix` of the
// family's inputs (each array holds the E experts one after another), so the baseline multiplies the weights
// the grouped kernels read.
std::vector<uint16_t> experts_f16(const GroupedOp& g, const HostBuffers& in, const std::string& prefix) {
  const int64_t experts = g.base["E"], n = g.base["N"], k = g.base["K"];
  QTensor t;
  t.type = g.type, t.rows = n, t.cols = k, t.group_size = int32_t(g.base["G"]);
  std::vector<uint16_t> out(size_t(experts * n * k));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t e = 0; e < experts; ++e) {
    for (const ArraySpec& spec : weight_traits(g.type).array_specs())
      t.set_array(spec.array, in.at(prefix + weight_array_name(spec.array)).data() + t.array_bytes(spec) * uint64_t(e));
    for (int64_t r = 0; r < n; ++r) {
      dequantize_row(t, r, row.data());
      uint16_t* dst = out.data() + (e * n + r) * k;
      for (int64_t c = 0; c < k; ++c) dst[c] = float_to_half_bits(row[size_t(c)]);
    }
  }
  return out;
}

// How far the baseline's output is from the grouped kernel's, row for row through the routing's order: a
// baseline that multiplied other rows or other experts would show it.
std::string agreement(const std::vector<uint16_t>& grouped, const std::vector<uint16_t>& sorted,
                      const std::vector<int32_t>& sorted_row, int64_t n) {
  double diff = 0, largest = 0;
  for (size_t p = 0; p < sorted_row.size(); ++p)
    for (int64_t c = 0; c < n; ++c) {
      const double want = half_bits_to_float(grouped[size_t(sorted_row[p]) * size_t(n) + size_t(c)]);
      const double got = half_bits_to_float(sorted[p * size_t(n) + size_t(c)]);
      diff = std::max(diff, std::fabs(got - want));
      largest = std::max(largest, std::fabs(want));
    }
  char b[160];
  std::snprintf(b, sizeof b, "; max |difference| from the tuned grouped output %.3g (outputs up to %.3g)", diff, largest);
  return b;
}

// The experts one by one on cuBLASLt, for one op: every expert's fp16 weights on the device, dequantized once
// when it is made (outside any timing).
class OneByOne {
 public:
  OneByOne(dev::Device& device, blas::BlasLt& lt, const GroupedOp& g, const HostBuffers& weights)
      : device_(device), lt_(lt), g_(g) {
    for (const std::string& prefix : g.fused ? std::vector<std::string>{"gate_", "up_"} : std::vector<std::string>{""}) {
      const std::vector<uint16_t> w = experts_f16(g, weights, prefix);
      w16_.emplace_back(device, w.size() * 2);
      w16_.back().upload(w);
    }
  }

  // Times the baseline at `shape` on the grouped plan's inputs `in` (x and ids); appends its variants. `grouped`,
  // when given, is the tuned grouped run whose output the baseline's is compared with.
  void measure(const Shape& shape, const HostBuffers& in, DeviceTimer& timer, const plan::PlanRun* grouped,
               json& variants) {
    const int64_t t = shape["T"], topk = shape["TOPK"], experts = shape["E"], n = shape["N"], k = shape["K"];
    const int64_t count = t * topk;
    const auto ids = kernels::from_bytes<int32_t>(in.at("ids"));
    // The order the gather writes (the same rule on the host as moe_init_routing's on the device): by expert,
    // stable; each expert's rows are one run from its offset.
    const km::InitRouting routing = km::init_routing(ids.data(), t, topk, experts, 0, experts, km::TokenCounts::Count);
    const std::vector<int64_t> rows = rows_per_expert(ids, experts);
    std::vector<int64_t> offset(size_t(experts) + 1, 0);
    std::partial_sum(rows.begin(), rows.end(), offset.begin() + 1);
    for (int64_t r : rows)
      if (r > 0) lt_.prepare(blas::WeightLayout::NK, r, n, k);
    const uint64_t matrix = uint64_t(n * k) * 2;
    auto gemms = [&](dev::DevPtr x, dev::DevPtr y0, dev::DevPtr y1) {
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t r = rows[size_t(e)], o = offset[size_t(e)];
        if (r == 0) continue;
        const dev::DevPtr xe = x.offset(uint64_t(o * k) * 2);
        lt_.gemm_f16(w16_[0].ptr().offset(matrix * uint64_t(e)), blas::WeightLayout::NK, xe, y0.offset(uint64_t(o * n) * 2), r, n, k);
        if (g_.fused)
          lt_.gemm_f16(w16_[1].ptr().offset(matrix * uint64_t(e)), blas::WeightLayout::NK, xe, y1.offset(uint64_t(o * n) * 2), r, n, k);
      }
    };
    int64_t active = 0;
    for (int64_t r : rows) active += r > 0;
    const double weight_bytes = double(active) * double(matrix) * double(w16_.size());
    const std::string what = std::to_string(active) + " experts with rows, " + std::to_string(g_.fused ? 2 * active : active) +
                             " cuBLASLt GEMMs (" + lt_.describe(blas::WeightLayout::NK, offset.back() / std::max<int64_t>(active, 1), n, k) +
                             " at the mean rows)";
    if (g_.fused) {
      const kernels::KernelFamily& gf = km::init_routing_family();
      const Shape gs = gf.shape({t, topk, experts, k, 0, experts, 0, 0}, "gather");
      plan::PlanRun gather(&device_, gf, gf.default_point(), gs, HostBuffers{{"ids", in.at("ids")}, {"x", in.at("x")}});
      const kernels::KernelFamily& sf = kernels::activation::swiglu_family();
      const Shape ss = sf.shape({count, n}, "swiglu");
      plan::PlanRun act(&device_, sf, sf.default_point(), ss, sf.make_inputs(ss, 1));
      const dev::DevPtr xs = gather.buffer("expanded_x"), gate = act.buffer("gate"), up = act.buffer("up");
      const double full = timer.time([&] {
        gather.enqueue();
        gemms(xs, gate, up);
        act.enqueue();
      });
      const double only = timer.time([&] { gemms(xs, gate, up); });
      const double act_bytes = double(t * k + count * n) * 2;
      std::string check;
      if (grouped) {
        device_.synchronize();
        check = agreement(kernels::from_bytes<uint16_t>(grouped->output("h")), kernels::from_bytes<uint16_t>(act.output("h")),
                          routing.sorted_row, n);
      }
      variants.push_back({{"name", "cublas one by one"}, {"seconds", full}, {"bytes", weight_bytes + act_bytes},
                          {"detail", "moe_init_routing gather + " + what + " + swiglu" + check}});
      variants.push_back({{"name", "cublas GEMMs only"}, {"seconds", only}, {"bytes", weight_bytes + act_bytes},
                          {"detail", what}});
      return;
    }
    // The down GEMMs read rows grouped by expert: x in the gather's order.
    const auto x = kernels::from_bytes<uint16_t>(in.at("x"));
    std::vector<uint16_t> sorted(size_t(count * k));
    for (int64_t p = 0; p < count; ++p)
      std::copy_n(x.begin() + routing.sorted_row[size_t(p)] * k, k, sorted.begin() + p * k);
    dev::Buffer xs(device_, sorted.size() * 2), y(device_, size_t(count * n) * 2);
    xs.upload(sorted);
    const double s = timer.time([&] { gemms(xs.ptr(), y.ptr(), dev::DevPtr{}); });
    std::string check;
    if (grouped) {
      device_.synchronize();
      check = agreement(kernels::from_bytes<uint16_t>(grouped->output("y")), y.download<uint16_t>(size_t(count * n)),
                        routing.sorted_row, n);
    }
    variants.push_back({{"name", "cublas one by one"}, {"seconds", s},
                        {"bytes", weight_bytes + double(count * (k + n)) * 2}, {"detail", what + check}});
  }

 private:
  dev::Device& device_;
  blas::BlasLt& lt_;
  const GroupedOp& g_;
  std::vector<dev::Buffer> w16_;  // [E][N][K] each: gate and up, or down
};

// The fastest verified time the store holds for the family at exactly this shape on this device, or why none.
json tune_best(const winners::WinnersTable* table, const winners::DeviceFingerprint& device, const std::string& prefix,
               const kernels::KernelFamily& f, const Shape& shape) {
  const std::string name = "best of the tune";
  if (!table) return unavailable(name, "no tune: no --tuned-cache");
  const auto w = table->lookup(device, prefix + f.name, f.dtypes, shape.values, f.source_hash);
  if (!w || !w->exact) return unavailable(name, "no tune: the store holds no verified point of " + f.name + " at this shape for this device");
  const auto point = point_from_json(f, w->point);
  return {{"name", name}, {"seconds", w->median_s},
          {"detail", f.name + " " + (point ? kernels::point_key(*point) : w->point.dump()) + " (qtune's timing)"}};
}

}  // namespace

std::vector<int32_t> seeded_routing(int64_t tokens, int64_t top_k, int64_t experts, uint64_t seed) {
  if (top_k < 1 || top_k > experts) throw Error("seeded routing: top-k must be in [1, experts]");
  Rng rng(seed);
  std::vector<int32_t> order(static_cast<size_t>(experts)), ids;
  ids.reserve(size_t(tokens * top_k));
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    // A partial Fisher-Yates shuffle: the first top_k places are a uniform draw without repeats.
    for (int64_t j = 0; j < top_k; ++j) {
      std::swap(order[size_t(j)], order[size_t(j + int64_t(rng.below(uint64_t(experts - j))))]);
      ids.push_back(order[size_t(j)]);
    }
  }
  return ids;
}

json bench_moe_grouped(dev::Device& device, const ModelWeights& weights, const std::string& store_prefix,
                       const KernelBenchOptions& options) {
  const std::vector<GroupedOp> ops = grouped_ops(weights);
  if (ops.empty()) return json();
  DeviceBench bench(device, store_prefix, options);
  json rows = json::array();
  for (const GroupedOp& g : ops) {
    std::fprintf(stderr, "qbench: %s N=%lld K=%lld, %lld experts, top %lld\n", g.family->name.c_str(),
                 (long long)g.base["N"], (long long)g.base["K"], (long long)g.base["E"], (long long)g.base["TOPK"]);
    // The weights once per op (they do not depend on T); x and ids are replaced per bucket.
    HostBuffers in = g.family->make_inputs(at_tokens(g.base, 1), kWeightSeed);
    // The same experts repacked for the Hopper family (its inputs are the file family's, from the same seed),
    // where this device runs it; else the row says why not.
    HostBuffers frag_in;
    std::string no_frag;
    if (!g.frag)
      no_frag = std::string("no Hopper grouped GEMM (") + g.op + ".frag) for " + weight_type_name(g.type) + " experts";
    else if (!bench.defaults.serves(g.op + ".frag", &g.type))
      no_frag = g.frag->name + " needs sm_" + std::to_string(g.frag->min_sm) + "a; this device is sm_" + std::to_string(device.arch());
    else
      frag_in = g.frag->make_inputs(at_tokens(g.base, 1), kWeightSeed);
    // The routed GEMV's own inputs (the same seed's experts in the frag layout); logits, x and the counters per bucket.
    HostBuffers routed_in;
    if (g.routed)
      routed_in = g.routed->make_inputs(kms::routed_shape(at_tokens(g.base, 1), g.renormalize), kWeightSeed);
    std::unique_ptr<OneByOne> baseline;
    std::string no_baseline = bench.no_blas;
    if (bench.lt) {
      try {
        baseline = std::make_unique<OneByOne>(device, *bench.lt, g, in);
      } catch (const std::exception& e) {
        no_baseline = e.what();
      }
    }
    for (const int64_t t : options.buckets) {
      const Shape shape = at_tokens(g.base, t);
      const int64_t topk = shape["TOPK"], count = t * topk, k = shape["K"], n = shape["N"];
      const std::vector<int32_t> ids = seeded_routing(t, topk, shape["E"], kRoutingSeed + uint64_t(t));
      in["ids"] = kernels::bytes_of(ids);
      in["x"] = kernels::bytes_of(random_halves(size_t((g.fused ? t : count) * k), kInputSeed));
      int64_t active = 0;
      for (int64_t r : rows_per_expert(ids, shape["E"])) active += r > 0;
      const double bytes = double(active) * double(expert_bytes(g)) * (g.fused ? 2 : 1) +
                           double((g.fused ? t : count) * k + count * n) * 2;
      json variants = json::array();
      // `point` replaces the chooser's (a neighbour of its default), when given.
      auto grouped = [&](const std::string& name, KernelChooser& chooser, const std::string& op,
                         const kernels::KernelFamily& family, const HostBuffers& inputs, const Shape* at = nullptr,
                         const kernels::Point* point = nullptr) -> std::unique_ptr<plan::PlanRun> {
        try {
          const Shape& timed = at ? *at : shape;
          const KernelChoice& c = chooser.choose(op, &g.type, timed);
          if (c.family != &family) throw Error("the dispatch chose " + (c.family ? c.family->name : c.external) + ", not " + family.name);
          const kernels::Point& p = point ? *point : c.point;
          auto run = std::make_unique<plan::PlanRun>(&device, *c.family, p, timed, inputs);
          const double s = bench.timer.time([&] { run->enqueue(); });
          variants.push_back({{"name", name}, {"seconds", s}, {"bytes", bytes},
                              {"detail", c.family->name + " " + kernels::point_key(p) + " (" + choice_source_name(c.source) + ")"}});
          return run;
        } catch (const std::exception& e) {
          variants.push_back(unavailable(name, e.what()));
          return nullptr;
        }
      };
      const std::unique_ptr<plan::PlanRun> tuned = grouped("tuned", bench.tuned, g.op, *g.family, in);
      grouped("default", bench.defaults, g.op, *g.family, in);  // freed at once: only the tuned output is compared
      if (!no_frag.empty()) {
        variants.push_back(unavailable("frag tuned", no_frag));
      } else {
        frag_in["ids"] = in.at("ids");
        frag_in["x"] = in.at("x");
        grouped("frag tuned", bench.tuned, g.op + ".frag", *g.frag, frag_in);
        grouped("frag default", bench.defaults, g.op + ".frag", *g.frag, frag_in);
        // The family's default points one report_ab parameter away (the wgmma k-steps in flight), beside it.
        std::vector<kernels::Neighbour> neighbours;
        try {
          const KernelChoice& d = bench.defaults.choose(g.op + ".frag", &g.type, shape);
          if (d.family == g.frag) neighbours = kernels::one_parameter_neighbours(*g.frag, d.point, shape);
        } catch (const Error&) {
        }  // no default to stand beside: "frag default" says why
        for (const kernels::Neighbour& ab : neighbours)
          grouped(report::neighbour_name("frag default", ab.param, ab.value), bench.defaults, g.op + ".frag", *g.frag,
                  frag_in, nullptr, &ab.point);
      }
      if (g.routed && t <= kms::kMaxTokens) {
        const Shape r = kms::routed_shape(shape, g.renormalize);
        routed_in["logits"] = kernels::bytes_of(logits_choosing(ids, t, shape["E"], topk));
        routed_in["x"] = in.at("x");
        routed_in["locks"] = std::vector<uint8_t>(size_t((g.fused ? count : t) * ((n + 63) / 64) * 4), 0);
        if (!g.fused) routed_in["out"] = kernels::bytes_of(random_halves(size_t(t * n), kInputSeed + 1));
        grouped("routed GEMV tuned", bench.tuned, g.routed->op, *g.routed, routed_in, &r);
        grouped("routed GEMV default", bench.defaults, g.routed->op, *g.routed, routed_in, &r);
      }
      if (baseline) {
        try {
          baseline->measure(shape, in, bench.timer, tuned.get(), variants);
        } catch (const std::exception& e) {
          variants.push_back(unavailable("cublas one by one", e.what()));
        }
      } else {
        variants.push_back(unavailable("cublas one by one", no_baseline));
      }
      rows.push_back({{"op", g.op}, {"type", weight_type_name(g.type)}, {"what", g.base.label}, {"T", t},
                      {"E", shape["E"]}, {"TOPK", topk}, {"N", n}, {"K", k}, {"G", shape["G"]},
                      {"variants", variants}, {"tune_best", tune_best(bench.table.get(), bench.fingerprint, store_prefix, *g.family, shape)}});
    }
  }
  return {{"method", kMoeMethod}, {"rows", rows}};
}

}  // namespace qt::rt
