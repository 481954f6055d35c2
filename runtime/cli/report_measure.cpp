#include "runtime/cli/report_measure.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "common/error.h"
#include "common/half.h"
#include "common/quantile.h"
#include "common/rng.h"
#include "device/blas/blas_lt.h"
#include "device/plan/run_plan.h"
#include "kernels_src/cpu_matvec/cpu_matvec_family.h"
#include "kernels_src/memcopy/mem_copy_family.h"
#include "kernels_src/registry/registry.h"
#include "models/core/linear_shapes.h"
#include "runtime/cli/device_timer.h"
#include "device/blas/default_route.h"
#include "runtime/gpu/device_backend.h"
#include "runtime/gpu/kernel_choice.h"
#include "runtime/model/qwen3_model.h"
#include "runtime/report/report_json.h"

namespace qt::rt {
namespace {

using nlohmann::json;
using report::family_default_name;
using Clock = std::chrono::steady_clock;

// A dense linear shape as the device runs it: the type as stored there (fp32/bf16 matrices become fp16), the
// group (K for unquantized types), the projections it serves, and the most rows it runs at (0: any).
struct DeviceLinear {
  WeightType type;
  int64_t n, k, g;
  std::string what;
  int64_t max_rows;
};

WeightType device_type(WeightType t) { return t == WeightType::F32 || t == WeightType::BF16 ? WeightType::F16 : t; }

// The model's dense linear shapes (models/core/linear_shapes.h, the tuner's list too: the concatenated q/k/v at
// one row, the lm_head up to its rows per pass), as the device stores them. The router and the experts are the
// MoE block's, measured with it.
std::vector<DeviceLinear> linear_shapes(const ModelWeights& w) {
  std::vector<DeviceLinear> out;
  for (const LinearShape& l : model_linear_shapes(w.config, &w)) {
    if (l.expert || l.label == "router" || !l.type) continue;
    const WeightType type = device_type(*l.type);
    const int64_t g = weight_traits(type).quantized && l.group > 0 ? l.group : l.k;
    out.push_back({type, l.n, l.k, g, l.label, l.max_rows});
  }
  return out;
}

uint64_t stored_bytes(WeightType type, int64_t n, int64_t k, int64_t g) {
  QTensor t;
  t.type = type, t.rows = n, t.cols = k, t.group_size = weight_traits(type).quantized ? g : 0;
  return t.storage_bytes();
}

json unavailable(const std::string& name, const std::string& why) { return {{"name", name}, {"unavailable", why}}; }

// Rows up to which a linear row is also timed in a chain: decode, where a launch's fixed cost is most of a
// GEMV's time alone.
constexpr int64_t kChainRows = 16;

std::vector<uint16_t> random_halves(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> h(n);
  for (auto& v : h) v = float_to_half_bits(float(rng.uniform() - 0.5) * 0.25f);
  return h;
}

}  // namespace

DeviceBandwidth measure_device_bandwidth(dev::Device& device, uint64_t bytes) {
  const kernels::KernelFamily& f = kernels::memcopy::copy_family();
  const kernels::Point point = f.default_point();
  const int64_t vectors = int64_t(std::max<uint64_t>(bytes / 16, 1));
  const kernels::Shape shape = f.shape({vectors}, "bandwidth");
  kernels::HostBuffers inputs;
  inputs["src"] = std::vector<uint8_t>(size_t(vectors) * 16, 0x5a);
  plan::PlanRun run(&device, f, point, shape, inputs);
  KernelBenchOptions o;
  o.min_reps = 20;
  o.min_seconds = 0.1;
  DeviceTimer timer(device, o);
  const double s = timer.time([&] { run.enqueue(); });
  DeviceBandwidth b;
  b.gbps = 2.0 * double(vectors) * 16 / s / 1e9;
  char text[160];
  std::snprintf(text, sizeof text, "mem_copy %s of %.0f MiB, read + written bytes over the median time",
                kernels::point_key(point).c_str(), double(vectors) * 16 / (1 << 20));
  b.method = text;
  return b;
}

json bench_device_kernels(dev::Device& device, const ModelWeights& weights, const std::string& store_prefix,
                          const KernelBenchOptions& options) {
  DeviceBench bench(device, store_prefix, options);
  json out = json::array();
  for (const DeviceLinear& ls : linear_shapes(weights)) {
    std::fprintf(stderr, "qbench: %s N=%lld K=%lld (%s)\n", weight_type_name(ls.type), (long long)ls.n,
                 (long long)ls.k, ls.what.c_str());
    const int64_t max_m = options.buckets.empty() ? 1 : *std::max_element(options.buckets.begin(), options.buckets.end());
    dev::Buffer w16, x16, y16;
    if (bench.lt) {
      w16 = dev::Buffer(device, size_t(ls.n * ls.k) * 2);
      w16.upload(random_halves(size_t(ls.n * ls.k), 7));
      x16 = dev::Buffer(device, size_t(max_m * ls.k) * 2);
      x16.upload(random_halves(size_t(max_m * ls.k), 8));
      y16 = dev::Buffer(device, size_t(max_m * ls.n) * 2);
    }
    const uint64_t wbytes = stored_bytes(ls.type, ls.n, ls.k, ls.g), f16bytes = uint64_t(ls.n * ls.k) * 2;
    std::vector<dev::Buffer> w16_chain;  // copies of w16 for the decode rows' chains, made on first use
    // What the runtime runs: the frag layout's families where it loads the weight so and they serve the type
    // (device_weights.h; the lm_head keeps the file layout), and beside them the file layout's default, the
    // kernels they replace.
    const bool frag = kernels::default_weight_layout("linear", ls.type, kernels::names_head(ls.what, true)) == "frag" &&
                      bench.defaults.serves("linear.frag", &ls.type);
    const std::string linear_op = frag ? "linear.frag" : "linear";
    // The dequant + cuBLASLt baseline (device/blas/blas_lt.h) of the type in that layout: its dequant kernel, once
    // per shape (it does not depend on M), then the GEMM on the fp16 layout that kernel writes.
    const blas::Baseline* baseline = blas::baseline_for(ls.type, linear_op);
    std::unique_ptr<plan::PlanRun> dequant;
    std::string no_dequant = baseline && baseline->dequant_family ? "" : "no dequant kernel for this type";
    for (const int64_t m : options.buckets) {
      if (ls.max_rows > 0 && m > ls.max_rows) continue;  // rows the runtime never runs this shape at
      const kernels::Shape shape{{"M", "N", "K", "G"}, {m, ls.n, ls.k, ls.g}, ls.what};
      const uint64_t act = uint64_t(m * ls.k + m * ls.n) * 2;
      json variants = json::array();
      std::map<std::string, kernels::HostBuffers> inputs;  // by family, for this M
      // One kernel choice timed as variant `name`; a choice the device refuses is a variant that says why.
      auto time_choice = [&](const std::string& name, const KernelChoice& c) {
        try {
          auto it = inputs.find(c.family->name);
          if (it == inputs.end()) it = inputs.emplace(c.family->name, c.family->make_inputs(shape, 1)).first;
          plan::PlanRun run(&device, *c.family, c.point, shape, it->second);
          const double s = bench.timer.time([&] { run.enqueue(); });
          variants.push_back({{"name", name}, {"seconds", s}, {"bytes", double(wbytes + act)},
                              {"detail", c.family->name + " " + kernels::point_key(c.point) + " (" +
                                             choice_source_name(c.source) + ")"}});
        } catch (const kernels::PointRejected& e) {
          variants.push_back(unavailable(name, e.what()));
        } catch (const Error& e) {
          variants.push_back(unavailable(name, e.what()));
        }
      };
      // What a chooser picks for the op, timed; the family it picked (null when none, or an external choice).
      auto family_variant = [&](const std::string& name, KernelChooser& chooser,
                                const std::string& op) -> const kernels::KernelFamily* {
        try {
          const KernelChoice& c = chooser.choose(op, &ls.type, shape);
          if (!c.family) {
            variants.push_back(unavailable(name, "an external contender: " + c.external));
            return nullptr;
          }
          time_choice(name, c);
          return c.family;
        } catch (const Error& e) {
          variants.push_back(unavailable(name, e.what()));
        }
        return nullptr;
      };
      // The cuBLASLt baselines at this M, timed first: the tuned and default variants may be one of them.
      json dequant_blas = unavailable("dequant+cublas", bench.lt ? no_dequant : bench.no_blas);
      json fp16_blas = unavailable("fp16 cublas", bench.no_blas);
      if (bench.lt) {
        if (no_dequant.empty() && !dequant) {
          try {
            const kernels::KernelFamily& dq = kernels::find_family(baseline->dequant_family);
            const kernels::Shape dshape = dq.shape_from(shape);
            dequant = std::make_unique<plan::PlanRun>(&device, dq, dq.default_point(), dshape, dq.make_inputs(dshape, 1));
          } catch (const std::exception& e) {
            no_dequant = e.what();
            dequant_blas = unavailable("dequant+cublas", no_dequant);
          }
        }
        if (dequant) {
          const dev::DevPtr w = dequant->buffer("w");
          const blas::WeightLayout layout = baseline->layout;
          bench.lt->prepare(layout, m, ls.n, ls.k);
          const double s = bench.timer.time([&] {
            dequant->enqueue();
            bench.lt->gemm_f16(w, layout, x16.ptr(), y16.ptr(), m, ls.n, ls.k);
          });
          dequant_blas = {{"name", "dequant+cublas"}, {"seconds", s}, {"bytes", double(wbytes + 2 * f16bytes + act)},
                          {"detail", std::string(baseline->dequant_family) + " + " + bench.lt->describe(layout, m, ls.n, ls.k)}};
        }
        bench.lt->prepare(blas::WeightLayout::NK, m, ls.n, ls.k);
        const double s = bench.timer.time([&] { bench.lt->gemm_f16(w16.ptr(), blas::WeightLayout::NK, x16.ptr(), y16.ptr(), m, ls.n, ls.k); });
        fp16_blas = {{"name", "fp16 cublas"}, {"seconds", s}, {"bytes", double(f16bytes + act)},
                     {"detail", bench.lt->describe(blas::WeightLayout::NK, m, ls.n, ls.k)}};
      }
      // A baseline's figures as the variant that runs it, saying why in its detail.
      auto baseline_as = [&](const json& timed, const std::string& name, const std::string& why) {
        if (timed.contains("unavailable")) return variants.push_back(unavailable(name, timed["unavailable"].get<std::string>()));
        json v = timed;
        v["name"] = name;
        v["detail"] = v["detail"].get<std::string>() + " (" + why + ")";
        variants.push_back(v);
      };
      // At decode rows, the tuned dispatch and FP16 cuBLASLt as a decode step runs them (DeviceTimer's Chain):
      // back to back, each launch's weights cold, no launch paying its fixed cost alone.
      auto time_chains = [&]() {
        const std::string fp16_name = report::chained_name("fp16 cublas"), tuned_name = report::chained_name("tuned");
        json fp16_chain = unavailable(fp16_name, bench.no_blas);
        if (bench.lt) {
          try {
            const Chain chain = chain_for(device, double(f16bytes + act));
            if (w16_chain.size() < size_t(chain.copies)) {
              const std::vector<uint16_t> host = random_halves(size_t(ls.n * ls.k), 7);  // w16's values
              while (w16_chain.size() < size_t(chain.copies)) {
                w16_chain.emplace_back(device, host.size() * 2);
                w16_chain.back().upload(host);
              }
            }
            bench.lt->prepare(blas::WeightLayout::NK, m, ls.n, ls.k);
            const double s = bench.timer.per_launch(chain, [&](int64_t copy) {
              bench.lt->gemm_f16(w16_chain[size_t(copy)].ptr(), blas::WeightLayout::NK, x16.ptr(), y16.ptr(), m, ls.n, ls.k);
            });
            fp16_chain = {{"name", fp16_name}, {"seconds", s}, {"bytes", double(f16bytes + act)},
                          {"detail", bench.lt->describe(blas::WeightLayout::NK, m, ls.n, ls.k) + " (" + chain.detail() + ")"}};
          } catch (const std::exception& e) {
            fp16_chain = unavailable(fp16_name, e.what());
          }
        }
        try {
          const KernelChoice& c = bench.tuned.choose(linear_op, &ls.type, shape);
          if (!c.family) {
            // The dispatch runs a cuBLASLt baseline: its chain where the report times one (FP16), as the launch
            // timed alone takes the baseline's figure.
            const blas::Baseline* row = store_baseline(c.external, store_prefix);
            if (!row || row->dequant_family) throw Error("the dispatch names " + c.external + ", which is not timed in a chain");
            if (fp16_chain.contains("unavailable")) throw Error(fp16_chain["unavailable"].get<std::string>());
            json v = fp16_chain;
            v["name"] = tuned_name;
            v["detail"] = v["detail"].get<std::string>() + " (dispatched: " + c.external + ")";
            variants.push_back(v);
          } else {
            const Chain chain = chain_for(device, double(wbytes + act));
            auto it = inputs.find(c.family->name);
            if (it == inputs.end()) it = inputs.emplace(c.family->name, c.family->make_inputs(shape, 1)).first;
            const double s = bench.timer.per_launch(chain, *c.family, c.point, shape, it->second);
            variants.push_back({{"name", tuned_name}, {"seconds", s}, {"bytes", double(wbytes + act)},
                                {"detail", c.family->name + " " + kernels::point_key(c.point) + " (" +
                                               choice_source_name(c.source) + "; " + chain.detail() + ")"}});
          }
        } catch (const std::exception& e) {
          variants.push_back(unavailable(tuned_name, e.what()));
        }
        variants.push_back(fp16_chain);
      };
      // The tuned variant follows the stored dispatch as the runtime does, a cuBLASLt baseline ranked first too
      // (timed at the heuristic's first candidate).
      try {
        const KernelChoice& c = bench.tuned.choose(linear_op, &ls.type, shape);
        if (c.family) {
          time_choice("tuned", c);
        } else if (const blas::Baseline* row = store_baseline(c.external, store_prefix); row && !row->dequant_family) {
          baseline_as(fp16_blas, "tuned", "dispatched: " + c.external);
        } else if (row && row == baseline) {
          baseline_as(dequant_blas, "tuned", "dispatched: " + c.external);
        } else {
          variants.push_back(unavailable("tuned", "the dispatch names " + c.external + ", which this report does not time here"));
        }
      } catch (const Error& e) {
        variants.push_back(unavailable("tuned", e.what()));
      }
      // The default variant is what the runtime runs without a tuned store (device/blas/default_route.h, as
      // DeviceBackend::linear follows it): cuBLASLt, dequant + cuBLASLt, or the op's default family.
      const blas::Route route = bench.lt ? blas::default_route(ls.type, frag, m, true) : blas::Route::kFamilies;
      const kernels::KernelFamily* runtime_default = nullptr;
      if (route == blas::Route::kCublasLt && fp16_blas.contains("seconds"))
        baseline_as(fp16_blas, "default", "the runtime's default route");
      else if (route == blas::Route::kDequantCublasLt && dequant_blas.contains("seconds"))
        baseline_as(dequant_blas, "default", "the runtime's default route");
      else
        runtime_default = family_variant("default", bench.defaults, linear_op);
      // Every other family that serves the op at this M on this device (the candidates the tuner and the
      // runtime weigh, min_sm included), at its default point: families the tune did not reach and the
      // runtime's default does not pick are measured too, so a report shows which one to make the default.
      for (const KernelChoice& c : bench.defaults.family_defaults(linear_op, &ls.type, shape)) {
        if (c.family != runtime_default) time_choice(family_default_name(c.family->name), c);
        // The family's other default points one parameter away from this one: the A/Bs its defaults name for
        // what the static model cannot weigh (the Hopper GEMMs' wgmma k-steps in flight).
        for (const kernels::Neighbour& n : kernels::one_parameter_neighbours(*c.family, c.point, shape)) {
          KernelChoice neighbour = c;
          neighbour.point = n.point;
          time_choice(report::neighbour_name(family_default_name(c.family->name), n.param, n.value), neighbour);
        }
      }
      if (frag) family_variant("file layout default", bench.defaults, "linear");
      variants.push_back(dequant_blas);
      variants.push_back(fp16_blas);
      if (m <= kChainRows) time_chains();
      out.push_back({{"type", weight_type_name(ls.type)}, {"what", ls.what}, {"N", ls.n}, {"K", ls.k}, {"G", ls.g},
                     {"M", m}, {"variants", variants}});
    }
  }
  return out;
}

json bench_cpu_kernels(const ModelWeights& weights, const KernelBenchOptions& options) {
  namespace cm = kernels::cpu_matvec;
  std::unique_ptr<winners::WinnersTable> table;
  if (!options.tuned_cache.empty()) table = std::make_unique<winners::WinnersTable>(options.tuned_cache);
  const winners::DeviceFingerprint cpu = winners::cpu_fingerprint();
  json out = json::array();
  for (const cm::MatvecShape& s : cm::model_matvec_shapes(weights)) {
    const kernels::KernelFamily& f = kernels::find_family(cm::matvec_family_name(s.type));
    const kernels::Shape shape = f.shape(s.shape, s.what);
    const kernels::HostBuffers inputs = f.make_inputs(shape, 1);
    const uint64_t bytes = stored_bytes(s.type, s.shape[0], s.shape[1], s.shape[2]) + uint64_t(s.shape[0] + s.shape[1]) * 4;
    json variants = json::array();
    auto time_point = [&](const std::string& name, const kernels::Point& p, const std::string& source) {
      try {
        plan::PlanRun run(nullptr, f, p, shape, inputs);
        run.run();  // warm-up: caches, the thread pool's threads
        const double seconds = median_of_runs(options, [&] { return run.run(); });
        variants.push_back({{"name", name}, {"seconds", seconds}, {"bytes", double(bytes)},
                            {"detail", f.name + " " + kernels::point_key(p) + " (" + source + ")"}});
      } catch (const std::exception& e) {
        variants.push_back(unavailable(name, e.what()));
      }
    };
    std::optional<kernels::Point> tuned;
    std::string source = "no tuned cache: the default";
    if (table) {
      if (const auto w = table->lookup(cpu, "cpu." + f.name, f.dtypes, s.shape, f.source_hash)) {
        tuned = point_from_json(f, w->point);
        source = w->exact ? "tuned" : "nearest tuned shape";
      } else {
        source = "no winner for this CPU and shape: the default";
      }
    }
    time_point("tuned", tuned.value_or(f.default_point()), source);
    time_point("default", f.default_point(), "default");
    for (const char* n : {"dequant+cublas", "fp16 cublas"}) variants.push_back(unavailable(n, "not on the CPU"));
    out.push_back({{"type", weight_type_name(s.type)}, {"what", s.what}, {"N", s.shape[0]}, {"K", s.shape[1]},
                   {"G", s.shape[2]}, {"M", 1}, {"variants", variants}});
  }
  return out;
}

json bench_end_to_end(const std::string& name, const std::string& model_path, const ModelWeights& weights,
                      Backend& backend, const EndToEndOptions& o, const std::function<double()>& memory_mb,
                      uint64_t decode_bytes) {
  const ModelConfig& c = weights.config;
  if (o.prompts.empty() || o.decode_steps <= 0 || o.repeat <= 0) throw Error("end to end: nothing to measure");
  const int64_t longest = *std::max_element(o.prompts.begin(), o.prompts.end());
  const int64_t context = std::max(longest, o.prompts[0] + o.decode_steps) + 1;
  if (context > c.max_seq_len)
    throw Error("end to end: a context of " + std::to_string(context) + " exceeds the model's " +
                std::to_string(c.max_seq_len));
  Qwen3Model model(weights, backend, context);
  auto tokens = [&](int64_t n) { return benchmark_prompt(n, c.vocab_size); };
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  json prefill = json::object();
  double decode = 0;
  for (int r = 0; r < o.repeat; ++r) {
    for (int64_t p : o.prompts) {
      const auto t = tokens(p);
      model.reset();
      const auto t0 = Clock::now();
      model.forward_greedy(t.data(), p);
      const double rate = double(p) / since(t0);
      const std::string key = std::to_string(p);
      prefill[key] = std::max(prefill.value(key, 0.0), rate);
    }
    const auto t = tokens(o.prompts[0]);
    model.reset();
    int32_t next = model.forward_greedy(t.data(), int64_t(t.size()));
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < o.decode_steps; ++i) next = model.forward_greedy(&next, 1);
    decode = std::max(decode, double(o.decode_steps) / since(t0));
  }
  return {{"name", name},
          {"model", model_path},
          {"prefill_tok_s", prefill},
          {"decode_tok_s", decode},
          {"decode_steps", o.decode_steps},
          {"decode_bytes_per_token", double(decode_bytes)},
          {"memory_mb", memory_mb()}};
}

std::vector<int32_t> benchmark_prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 7919 + 13) % vocab);
  return t;
}

uint64_t predequantized_decode_bytes(const ModelWeights& w, uint64_t quantized) {
  uint64_t bytes = quantized;
  auto swap = [&](const QTensor& t) {
    if (t.empty() || !weight_traits(t.type).quantized) return;
    bytes = bytes - t.storage_bytes() + uint64_t(t.rows * t.cols) * 2;
  };
  for (const LayerWeights& l : w.layers)
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3, &l.router}) swap(*t);
  if (!w.classifier.empty() && w.classifier.data != w.embedding.data) swap(w.classifier);
  return bytes;
}

}  // namespace qt::rt
