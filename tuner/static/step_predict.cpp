#include "tuner/static/step_predict.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "common/error.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/registry/registry.h"

namespace qt::tune {
namespace {

using kernels::KernelFamily;
using kernels::Point;
using kernels::Shape;

// The families the runtime considers for an op (KernelChooser::candidates), in registry order.
std::vector<const KernelFamily*> candidates(const StepLaunch& l, int sm) {
  std::vector<const KernelFamily*> out;
  for (const KernelFamily* f : kernels::all_families()) {
    if (f->on_host() || f->op != l.op || f->min_sm > sm) continue;
    if (l.type ? !f->serves(*l.type) : !f->weight_types.empty()) continue;
    out.push_back(f);
  }
  return out;
}

bool runs(const KernelFamily& f, const Point& p, const Shape& s) { return kernels::point_runs(f, p, s).empty(); }

std::optional<LaunchEstimate> estimate(const KernelFamily& f, const Point& p, const StepLaunch& l, int sm,
                                       const GpuPeaks& peak) {
  if (!runs(f, p, l.shape)) return std::nullopt;
  try {
    LaunchEstimate e{f.name, kernels::point_key(p), p, 0, estimate_point(f, p, l.shape, sm, peak), 0};
    e.launches = int(f.plan(p, l.shape).launches.size());
    return e;
  } catch (const kernels::PointRejected&) {
    return std::nullopt;
  }
}

// KernelChooser::choose with no tuned store: the first candidate whose default point runs at the shape the
// runtime chooses by.
// register_ring: the defaults as they were before the shared ring (StepRuntime::register_ring).
std::optional<LaunchEstimate> default_choice(const std::vector<const KernelFamily*>& fams, const StepLaunch& l, int sm,
                                             const GpuPeaks& peak, bool register_ring) {
  for (const KernelFamily* f : fams)
    for (const Point& p : f->default_points(l.choice_shape))
      if ((!register_ring || kernels::frag::stream_ring(p) == 0) && runs(*f, p, l.choice_shape))
        if (auto e = estimate(*f, p, l, sm, peak)) return e;
  return std::nullopt;
}

std::optional<LaunchEstimate> best_choice(const std::vector<const KernelFamily*>& fams, const StepLaunch& l, int sm,
                                          const GpuPeaks& peak) {
  std::optional<LaunchEstimate> best;
  for (const KernelFamily* f : fams)
    for (const Point& p : kernels::enumerate_points(*f))
      if (auto e = estimate(*f, p, l, sm, peak); e && (!best || e->e.seconds < best->e.seconds)) best = e;
  return best;
}

// An fp16 GEMM on cuBLASLt: weights, activations in and out once at the achievable bandwidth, the flops at
// kCublasLtEfficiency of the tensor pipe cuBLASLt uses (wgmma where the GPU has it), one launch.
LaunchEstimate cublaslt(const StepLaunch& l, const GpuPeaks& peak) {
  const double m = double(l.shape["M"]), n = double(l.shape["N"]), k = double(l.shape["K"]);
  RooflineEstimate e;
  e.bytes = 2 * (n * k + m * k + m * n);
  e.flops = 2 * m * n * k;
  const double tflops = peak.wgmma_tflops > 0 ? peak.wgmma_tflops : peak.tensor_tflops;
  e.memory_s = e.bytes / (peak.dram_gbps * 1e9 * peak.dram_efficiency);
  e.compute_s = e.flops / (tflops * 1e12 * kCublasLtEfficiency);
  e.launch_s = peak.launch_us * 1e-6;
  e.seconds = std::max(e.memory_s, e.compute_s) + e.launch_s;
  e.bandwidth_share = e.bytes / e.seconds / (peak.dram_gbps * 1e9);
  e.bound = e.launch_s > std::max(e.memory_s, e.compute_s) ? "launch" : e.memory_s >= e.compute_s ? "memory" : "compute";
  char what[96];
  std::snprintf(what, sizeof what, "cuBLASLt (roofline at %.0f%% of the tensor peak)", 100 * kCublasLtEfficiency);
  return {what, "", {}, 0, e, 1};
}

// Resources of compiled points, by family name and point key.
using CompiledPoints = std::map<std::pair<std::string, std::string>, std::vector<KernelResources>>;

// Every point in `chosen` compiled for `sm`, one batch a family (the service compiles a batch in parallel).
CompiledPoints compile_points(const std::vector<const LaunchEstimate*>& chosen, int sm, compile::CompileService& service) {
  std::map<std::string, std::map<std::string, Point>> by_family;
  for (const LaunchEstimate* e : chosen)
    if (!e->at.empty()) by_family[e->family].emplace(e->point, e->at);
  CompiledPoints out;
  for (const auto& [family, points] : by_family) {
    std::vector<Point> list;
    for (const auto& [key, p] : points) list.push_back(p);
    const std::vector<compile::PointResult> compiled = service.compile(kernels::find_family(family), list, sm);
    for (size_t i = 0; i < compiled.size() && i < list.size(); ++i) {
      if (compiled[i].ok()) out[{family, kernels::point_key(list[i])}] = model_resources(compiled[i].kernels);
    }
  }
  return out;
}

// `e` timed again with its point's compiled kernels (cuBLASLt as it was); false when its point did not compile.
bool with_registers(LaunchEstimate& e, const StepLaunch& l, int sm, const GpuPeaks& peak, const CompiledPoints& compiled) {
  if (e.at.empty()) return true;
  const auto it = compiled.find({e.family, e.point});
  if (it == compiled.end()) return false;
  const KernelFamily& f = kernels::find_family(e.family);
  try {
    e.e = estimate_point(f, e.at, l.shape, sm, peak, it->second);
  } catch (const kernels::PointRejected&) {
    return false;  // its registers leave no block room on this architecture: timed as before, counted
  }
  const kernels::LaunchPlan plan = f.plan(e.at, l.shape);
  const std::string& main = plan.launches[kernels::main_launch(plan)].kernel;
  for (const KernelResources& r : it->second)
    if (r.name_expression == main) e.registers = r.registers;
  return true;
}

}  // namespace

StepPrediction predict_step(const StepSpec& spec, int sm, const GpuPeaks& device, compile::CompileService* service) {
  // Launches inside a step run back to back in one stream (a replayed graph for decode): each costs the
  // in-stream figure, not the one the tuner's events see around an isolated kernel.
  GpuPeaks peak = device;
  peak.launch_us = device.stream_launch_us;
  StepPrediction out;
  for (const StepLaunch& l : step_launches(spec)) {
    LaunchPrediction p{l, {}, {}};
    std::vector<const KernelFamily*> fams = candidates(l, sm);
    if (spec.runtime.gemv_first)
      std::stable_partition(fams.begin(), fams.end(), [](const KernelFamily* f) { return !kernels::frag::is_stream_family(*f); });
    std::optional<LaunchEstimate> d = fams.empty() ? std::nullopt : default_choice(fams, l, sm, peak, spec.runtime.register_ring);
    // fp16 weights no family serves go to cuBLASLt whatever M is (DeviceBackend::linear).
    if (!d && (l.op == "cublaslt" || (l.type == WeightType::F16 && l.op == "linear"))) d = cublaslt(l, peak);
    if (!d)
      throw Error("step model: no kernel family runs " + l.op + " at " + kernels::shape_key(l.shape) + " on sm_" +
                  std::to_string(sm));
    std::optional<LaunchEstimate> b = fams.empty() ? std::nullopt : best_choice(fams, l, sm, peak);
    p.by_default = *d, p.best = b ? *b : *d;
    out.launches.push_back(std::move(p));
  }
  if (service) {
    std::vector<const LaunchEstimate*> chosen;
    for (const LaunchPrediction& p : out.launches) chosen.push_back(&p.by_default), chosen.push_back(&p.best);
    const CompiledPoints compiled = compile_points(chosen, sm, *service);
    out.registers_compiled = true;
    for (LaunchPrediction& p : out.launches) {
      if (!with_registers(p.by_default, p.launch, sm, peak, compiled)) ++out.uncompiled;
      if (!with_registers(p.best, p.launch, sm, peak, compiled)) ++out.uncompiled;
    }
  }
  for (LaunchPrediction& p : out.launches) {
    if (p.by_default.e.seconds < p.best.e.seconds) p.best = p.by_default;  // cuBLASLt, or a default the space lacks
    out.default_s += double(p.launch.count) * p.by_default.e.seconds;
    out.best_s += double(p.launch.count) * p.best.e.seconds;
    out.default_launches += p.launch.count * p.by_default.launches;
    out.best_launches += p.launch.count * p.best.launches;
  }
  out.min_bytes = step_min_bytes(spec);
  out.roofline_s = (out.min_bytes.weights + out.min_bytes.kv) / (peak.dram_gbps * 1e9 * peak.dram_efficiency);
  out.tokens = spec.decode ? 1.0 : double(spec.context);
  return out;
}

}  // namespace qt::tune
