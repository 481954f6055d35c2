#include "device/jit/compile_service.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "kernels_src/registry/registry.h"
#include "device/jit/compile_cache.h"
#include "device/jit/cubin_identity.h"

namespace qt::compile {
namespace {

// The launch of a point's kernel whose block and dynamic shared memory its report gives: as the probe shape's plan
// launches it, else as the first test shape's that does (a point may hold kernels only some shapes launch: the
// stream GEMV's ring across groups, for groups its depth does not divide). Test shapes are planned only when the
// plans so far lack the kernel.
class LaunchFinder {
 public:
  LaunchFinder(const kernels::KernelFamily& family, const kernels::Point& point) : family_(family), point_(point) {
    plans_.push_back(family.plan(point, family.probe_shape));
  }
  const kernels::Launch* find(const std::string& kernel) {
    for (size_t i = 0;; ++i) {
      if (i == plans_.size() && !plan_next()) return nullptr;
      for (const kernels::Launch& l : plans_[i].launches)
        if (l.kernel == kernel) return &l;
    }
  }

 private:
  bool plan_next() {
    while (next_test_ < family_.test_shapes.size()) {
      const kernels::Shape& s = family_.test_shapes[next_test_++];
      if (family_.shape_constraint && !family_.shape_constraint(point_, s).empty()) continue;
      plans_.push_back(family_.plan(point_, s));
      return true;
    }
    return false;
  }
  const kernels::KernelFamily& family_;
  const kernels::Point& point_;
  std::deque<kernels::LaunchPlan> plans_;  // a deque keeps the returned launches where they are as it grows
  size_t next_test_ = 0;
};

}  // namespace

const KernelReport& PointResult::kernel(const std::string& name_expression) const {
  for (const auto& k : kernels)
    if (k.name_expression == name_expression) return k;
  throw Error("point " + kernels::point_key(point) + " has no kernel " + name_expression, kExitFailure);
}

CompileService::CompileService(ServiceOptions options) : options_(std::move(options)) {
  if (options_.cache_dir.empty()) options_.cache_dir = default_cache_dir();
  if (options_.threads <= 0) options_.threads = std::max(1u, std::thread::hardware_concurrency());
}

CompileRequest CompileService::request_for(const kernels::KernelFamily& family, const kernels::Point& point,
                                           int sm) const {
  CompileRequest req;
  req.program_name = family.source;
  req.source = kernels::read_family_source(family);
  req.name_expressions = family.kernels(point);
  req.sm = sm;
  req.options = options_.extra_options;
  return req;
}

CompileOutput CompileService::compile_cached(const CompileRequest& req, bool* hit) {
  if (hit) *hit = false;
  if (!options_.use_cache) return nvrtc_compile(req);
  const CompileCache cache(options_.cache_dir);
  const std::string key = cache_key(req);
  if (auto cached = cache.load(key)) {
    if (hit) *hit = true;
    return *cached;
  }
  CompileOutput out = nvrtc_compile(req);
  try {
    cache.store(key, out);
  } catch (const std::exception& e) {
    // An unwritable cache costs time, not correctness: keep the result and say so once.
    static std::once_flag warned;
    std::call_once(warned, [&] { std::fprintf(stderr, "qtune: warning: compile cache not written: %s\n", e.what()); });
  }
  return out;
}

std::vector<PointResult> CompileService::compile(const kernels::KernelFamily& family,
                                                 const std::vector<kernels::Point>& points, int sm) {
  if (family.on_host()) throw Error("kernel family " + family.name + " runs on the host; NVRTC has nothing to compile");
  const ArchLimits& arch = arch_limits(sm);
  if (sm < family.min_sm)
    throw Error("kernel family " + family.name + " needs " + arch_name(family.min_sm) + " or newer, not " +
                arch_name(sm));
  for (const auto& p : points) kernels::validate_point(family, p);

  // Points that instantiate the same kernels share one program (e.g. they differ only in split_k).
  std::vector<CompileRequest> programs;
  std::map<std::vector<std::string>, size_t> program_of_names;
  std::vector<size_t> program_of_point;
  for (const auto& p : points) {
    CompileRequest req = request_for(family, p, sm);
    auto [it, fresh] = program_of_names.emplace(req.name_expressions, programs.size());
    if (fresh) programs.push_back(std::move(req));
    program_of_point.push_back(it->second);
  }

  struct Outcome {
    CompileOutput out;
    std::string error;
    bool hit = false;
    double seconds = 0;
  };
  std::vector<Outcome> outcomes(programs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < programs.size(); i = next++) {
      const auto start = std::chrono::steady_clock::now();
      try {
        outcomes[i].out = compile_cached(programs[i], &outcomes[i].hit);
      } catch (const std::exception& e) {
        outcomes[i].error = e.what();
      }
      outcomes[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  };
  std::vector<std::thread> pool;
  const int n = std::min<int>(options_.threads, static_cast<int>(programs.size()));
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  std::vector<PointResult> results;
  std::map<std::string, std::string> first_with_code;  // code digest -> point key
  for (size_t i = 0; i < points.size(); ++i) {
    const Outcome& o = outcomes[program_of_point[i]];
    PointResult r;
    r.point = points[i];
    r.sm = sm;
    r.cache_hit = o.hit;
    r.seconds = o.seconds;
    if (!o.error.empty()) {
      r.error = o.error;
      results.push_back(std::move(r));
      continue;
    }
    r.cubin = std::make_shared<const std::vector<uint8_t>>(o.out.cubin);
    r.cubin_sha256 = cubin_digest(o.out.cubin);
    r.code_sha256 = code_digest(o.out.cubin);
    LaunchFinder launches(family, points[i]);
    for (const auto& expr : programs[program_of_point[i]].name_expressions) {
      KernelReport k;
      k.name_expression = expr;
      k.lowered_name = o.out.lowered_names.at(expr);
      k.resources = find_kernel(o.out.resources, k.lowered_name);
      if (const kernels::Launch* l = launches.find(expr))
        k.block_threads = static_cast<int>(l->block.count()), k.dynamic_smem = l->dynamic_smem;
      k.occupancy = occupancy(arch, k.resources.registers, k.block_threads, k.resources.static_smem + k.dynamic_smem);
      // Its registers and spills are known, its block and occupancy not where no shape at hand launches it.
      if (k.block_threads == 0) k.occupancy.limiter = "not launched at the probe or test shapes";
      if (r.pruned.empty() && k.resources.spills())
        r.pruned = expr + " spills " + std::to_string(k.resources.spill_stores) + " B stores / " +
                   std::to_string(k.resources.spill_loads) + " B loads";
      if (r.pruned.empty() && k.block_threads > 0 && k.occupancy.blocks_per_sm == 0)
        r.pruned = expr + ": " + k.occupancy.limiter;
      r.kernels.push_back(std::move(k));
    }
    auto [it, fresh] = first_with_code.emplace(r.code_sha256, kernels::point_key(points[i]));
    if (!fresh) r.same_code_as = it->second;
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace qt::compile
