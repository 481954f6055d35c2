// The GPU tuning flow (qtune --model X --gpu smNN) run on the emulator: every family, shape and batch bucket
// tuned and stored with a batch dispatch, a crashing candidate costing only its worker, a wrong one never
// winning, and a run stopped half-way resuming from the store instead of measuring again.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>

#include "kernels_src/registry/registry.h"
#include "models/formats/model_file.h"
#include "tests/tuner/scratch_path.h"
#include "tuner/flow/gpu_tuning.h"

using namespace qt;
using namespace qt::tune;

namespace {

const std::string kModel = std::string(QTUNE_SOURCE_DIR) + "/tests/golden/files/dense-tied.ak48";

GpuTuningOptions emu_options(std::vector<std::string> families, std::vector<int64_t> buckets, std::string budget) {
  GpuTuningOptions o;
  o.device = "emu";
  o.families = std::move(families);
  o.buckets = std::move(buckets);
  o.budget = std::move(budget);
  o.quiet = true;
  o.tune.strategy = "random";
  o.tune.timeout_s = 120;
  o.tune.measure.warmup = 0;
  o.tune.measure.min_reps = o.tune.measure.max_reps = 1;
  o.tune.measure.min_seconds = 0;
  o.tune.measure.racing = false;
  return o;
}

// awq_gemv restricted to three points: warps=2 aborts the worker, warps=8 launches nothing (its output
// stays garbage), warps=4 is the real kernel.
const kernels::KernelFamily& faulty_gemv() {
  static const kernels::KernelFamily f = [] {
    kernels::KernelFamily k = kernels::find_family("awq_gemv");
    k.name = "test.awq_gemv_faulty";
    k.params = {{"warps", {2, 4, 8}, 4, ""}, {"vec", {1}, 1, ""}, {"mt", {1}, 1, ""}, {"split_k", {1}, 1, ""}};
    k.defaults = {{{"warps", 4}, {"vec", 1}, {"mt", 1}, {"split_k", 1}}};
    auto plan = k.plan;
    k.plan = [plan](const kernels::Point& p, const kernels::Shape& s) {
      if (p.at("warps") == 2) std::abort();
      kernels::LaunchPlan lp = plan(p, s);
      if (p.at("warps") == 8) lp.launches.clear();
      return lp;
    };
    return k;
  }();
  return f;
}

}  // namespace

TEST_CASE("the GPU flow on the emulator tunes every batch bucket of every shape and stores a batch dispatch",
          "[tuner][gpu-flow]") {
  auto mf = ModelFile::open(kModel);
  GpuTuningOptions o = emu_options({"awq_gemv", "awq_gemm"}, {1, 4, 16}, "1");
  const std::vector<GpuJob> jobs = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  std::set<std::vector<int64_t>> gemv_shapes, gemm_shapes;
  for (const GpuJob& j : jobs) (j.family->family().name == "awq_gemv" ? gemv_shapes : gemm_shapes).insert(j.shape);
  // The GEMV serves M <= 8 only, so bucket 16 is the GEMM's alone.
  for (const auto& s : gemv_shapes) REQUIRE(s[0] <= 8);
  REQUIRE(gemm_shapes.size() == 3 * gemv_shapes.size() / 2);

  Store store(test::tuner_scratch("gpu-flow", ".sqlite"));
  Worker worker(handle_candidate_request);
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 86);
  REQUIRE(dev.arch == "sm_86");
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "test");
  REQUIRE(res.measured == int64_t(jobs.size()));
  for (const TuneReport& r : res.reports) REQUIRE(r.best_point);
  REQUIRE(store.count() == int64_t(jobs.size()));
  // One dispatch line per linear shape, and each shape's buckets are stored ranked.
  REQUIRE(res.dispatch_lines.size() == gemv_shapes.size() / 2);
  const auto& any = *gemv_shapes.begin();
  const auto entries = store.dispatch(dev, "linear", "AWQ_INT4", {any.begin() + 1, any.end()});
  REQUIRE(entries.size() == 3);
  REQUIRE(entries[0].ranking.size() == 2);  // both families measured at M=1
  REQUIRE(entries[2].bucket == 16);
  REQUIRE(entries[2].ranking.size() == 1);
  REQUIRE(entries[2].ranking[0].family == "emu.awq_gemm");
}

TEST_CASE("in the GPU flow a faulting candidate kills only its worker and a wrong one never wins", "[tuner][gpu-flow]") {
  kernels::add_family(&faulty_gemv());
  auto mf = ModelFile::open(kModel);
  GpuTuningOptions o = emu_options({"test.awq_gemv_faulty"}, {1}, "100%");
  o.tune.strategy = "exhaustive";
  const std::vector<GpuJob> jobs = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  REQUIRE(!jobs.empty());
  Store store(test::tuner_scratch("gpu-flow-faults", ".sqlite"));
  Worker worker(handle_candidate_request);
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 86);
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "test");
  for (const auto& [k, v] : res.statuses) UNSCOPED_INFO(k << " " << v);
  REQUIRE(res.statuses.at("crashed") == int(jobs.size()));
  REQUIRE(res.statuses.at("wrong_result") == int(jobs.size()));
  REQUIRE(res.statuses.at("ok") == int(jobs.size()));
  for (const TuneReport& r : res.reports) {
    REQUIRE(r.best_point);
    REQUIRE(r.best_point->at("warps") == 4);
  }
  REQUIRE(worker.spawned() == 1 + int(jobs.size()));  // the first, then one after each fault
}

TEST_CASE("a GPU tuning run stopped half-way resumes from the store and measures only what is left",
          "[tuner][gpu-flow]") {
  auto mf = ModelFile::open(kModel);
  const std::vector<std::string> families = {"awq_gemv"};
  // Stopped after the first candidate of every job (a run with budget 1), then started again with 3.
  Store resumed(test::tuner_scratch("gpu-flow-resumed", ".sqlite"));
  Worker worker(handle_candidate_request);
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 86);
  GpuTuningOptions first = emu_options(families, {1, 2}, "1");
  const auto jobs1 = plan_gpu_jobs(mf->config(), &mf->weights(), first);
  tune_gpu_jobs(jobs1, resumed, worker, dev, first, "first");
  GpuTuningOptions full = emu_options(families, {1, 2}, "3");
  const auto jobs = plan_gpu_jobs(mf->config(), &mf->weights(), full);
  const GpuTuningResult res = tune_gpu_jobs(jobs, resumed, worker, dev, full, "second");
  REQUIRE(res.resumed == int64_t(jobs.size()));
  REQUIRE(res.measured == 2 * int64_t(jobs.size()));

  // The same points as one uninterrupted run.
  Store straight(test::tuner_scratch("gpu-flow-straight", ".sqlite"));
  tune_gpu_jobs(jobs, straight, worker, dev, full, "straight");
  auto keys = [](const Store& s) {
    std::set<std::string> k;
    for (const ResultRow& r : s.rows()) k.insert(nlohmann::json(r.shape).dump() + r.point.dump());
    return k;
  };
  REQUIRE(straight.count() == 3 * int64_t(jobs.size()));
  REQUIRE(keys(resumed) == keys(straight));
}
