#include "runtime/cli/report_attention.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/error.h"
#include "device/plan/run_plan.h"
#include "kernels_src/attention/attention_family.h"
#include "kernels_src/registry/registry.h"
#include "runtime/cli/device_timer.h"
#include "runtime/report/report_json.h"

namespace qt::rt {
namespace {

using nlohmann::json;

const char* const kAttentionMethod =
    "one query token at the last row of a cache of exactly that many rows (P = context - 1), the model's heads; "
    "GB/s counts the context's K and V rows plus q and the output, so it is the KV read rate. Each variant is "
    "timed alone between two events, which also holds a launch's fixed cost; \"tuned in a chain\" is the tuned "
    "choice as a decode step runs it, launched back to back, per launch, each launch on its own copy of the "
    "inputs in turn, the copies together at least twice the L2, so that no launch finds its cache in L2";

}  // namespace

std::vector<int64_t> default_attention_contexts(bool emulator) {
  if (emulator) return {64};
  return {4096, 32768};
}

json bench_attention_decode(dev::Device& device, const ModelWeights& weights, const std::string& store_prefix,
                            const KernelBenchOptions& options, const std::vector<int64_t>& contexts) {
  const ModelConfig& c = weights.config;
  DeviceBench bench(device, store_prefix, options);
  json rows = json::array();
  for (const int64_t context : contexts) {
    if (context < 1) throw Error("--attention-contexts: a context must be at least 1 token, not " + std::to_string(context));
    std::fprintf(stderr, "qbench: attention decode at context %lld\n", (long long)context);
    const std::vector<std::string> dims = {"M", "H", "KVH", "D", "C", "P"};
    const kernels::Shape run{dims, {1, c.n_heads, c.n_kv_heads, c.head_dim, context, context - 1}, "attention"};
    const kernels::Shape choice = kernels::attention::choice_shape(1, c.n_heads, c.n_kv_heads, c.head_dim, context);
    const double bytes = 2.0 * double(context) * double(c.n_kv_heads * c.head_dim) * 2 + 2.0 * double(c.q_dim()) * 2;
    json variants = json::array();
    std::optional<kernels::HostBuffers> inputs;
    // One point's median time on the run shape; throws where the device refuses the point.
    auto seconds_at = [&](const kernels::KernelFamily& f, const kernels::Point& p) {
      if (!inputs) inputs = f.make_inputs(run, 1);
      plan::PlanRun r(&device, f, p, run, *inputs);
      return bench.timer.time([&] { r.enqueue(); });
    };
    auto time_point = [&](const std::string& name, const kernels::KernelFamily& f, const kernels::Point& p,
                          const std::string& source) {
      try {
        variants.push_back({{"name", name}, {"seconds", seconds_at(f, p)}, {"bytes", bytes},
                            {"detail", f.name + " " + kernels::point_key(p) + " (" + source + ")"}});
      } catch (const std::exception& e) {
        variants.push_back({{"name", name}, {"unavailable", e.what()}});
      }
    };
    auto chosen = [&](const std::string& name, KernelChooser& chooser) -> const KernelChoice* {
      try {
        const KernelChoice& ch = chooser.choose("attention_decode", nullptr, choice);
        time_point(name, *ch.family, ch.point, choice_source_name(ch.source));
        return &ch;
      } catch (const Error& e) {
        variants.push_back({{"name", name}, {"unavailable", e.what()}});
      }
      return nullptr;
    };
    const KernelChoice* t = chosen("tuned", bench.tuned);
    // The tuned choice in a chain: launches back to back over enough copies of the inputs that each launch's K
    // and V come from DRAM, as they do in a decode step (where the weights between two layers' attentions evict
    // them), and no launch pays its fixed cost alone.
    if (t && t->family) {
      try {
        if (!inputs) inputs = t->family->make_inputs(run, 1);
        const Chain chain = chain_for(device, bytes);
        const double s = bench.timer.per_launch(chain, *t->family, t->point, run, *inputs);
        variants.push_back({{"name", report::chained_name("tuned")}, {"seconds", s}, {"bytes", bytes},
                            {"detail", t->family->name + " " + kernels::point_key(t->point) + " (" +
                                           choice_source_name(t->source) + "; " + chain.detail() + ")"}});
      } catch (const std::exception& e) {
        variants.push_back({{"name", report::chained_name("tuned")}, {"unavailable", e.what()}});
      }
    }
    const KernelChoice* d = chosen("default", bench.defaults);
    // The choices the family asks every run to time beside its default (Param::report_ab): the tensor-core kernel
    // against its twin on the CUDA cores.
    if (d && d->family && d->source == KernelChoice::Source::Default)
      for (const kernels::Neighbour& n : kernels::one_parameter_neighbours(*d->family, d->point, choice))
        time_point("default, " + n.param + "=" + n.value, *d->family, n.point,
                   "the default with " + n.param + " alone changed");
    // The split count is what a longer context asks more of: every value, at each default point's other
    // parameters (its thread count, tile and stages), the fastest kept. Points that cannot run the shape are
    // skipped; each configuration is one compiled kernel, the split count only its grid.
    if (d && d->family) {
      const kernels::KernelFamily& f = *d->family;
      std::vector<int64_t> split_values;
      for (const kernels::Param& ps : f.params)
        if (ps.name == "splits") split_values = ps.values;
      std::vector<kernels::Point> configs;
      for (kernels::Point p : f.default_points(choice)) {
        p.erase("splits");
        if (std::find(configs.begin(), configs.end(), p) == configs.end()) configs.push_back(p);
      }
      std::optional<std::pair<double, kernels::Point>> best;
      for (const kernels::Point& config : configs)
        for (const int64_t v : split_values) {
          kernels::Point p = config;
          p["splits"] = v;
          if ((f.point_constraint && !f.point_constraint(p).empty()) ||
              (f.shape_constraint && !f.shape_constraint(p, run).empty()))
            continue;
          try {
            const double s = seconds_at(f, p);
            if (!best || s < best->first) best = {s, p};
          } catch (const std::exception&) {
            // a point the device refuses is no contender
          }
        }
      if (best)
        variants.push_back({{"name", "best splits"}, {"seconds", best->first}, {"bytes", bytes},
                            {"detail", f.name + " " + kernels::point_key(best->second) +
                                           " (the fastest split count at any default point's other parameters)"}});
    }
    rows.push_back({{"context", context}, {"H", c.n_heads}, {"KVH", c.n_kv_heads}, {"D", c.head_dim},
                    {"variants", variants}});
  }
  return {{"method", kAttentionMethod}, {"rows", rows}};
}

}  // namespace qt::rt
