// The GPU tuning flow on a real GPU: the worker's CUDA context (never this process's, which forks it), the
// full fingerprint, event timings with the L2 flushed between repetitions, and the batch dispatch stored.
// Without a GPU the test is reported skipped with the worker's reason.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "tests/tuner/run_qtune.h"
#include "common/error.h"
#include "models/formats/model_file.h"
#include "tests/skip.h"
#include "tests/tuner/scratch_path.h"
#include "tuner/flow/gpu_tuning.h"
#include "common/paths.h"

using namespace qt;
using namespace qt::tune;

namespace {

// The worker's GPU, or nullopt and in `why` the reason there is none.
std::optional<winners::DeviceFingerprint> worker_gpu(Worker& worker, std::string& why) {
  try {
    return worker_device_fingerprint(worker, "cuda", 0);
  } catch (const Error& e) {
    if (e.exit_code() != kExitUnavailable) throw;
    why = e.what();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("on a GPU the flow times verified candidates with events and stores the GPU's fingerprint and dispatch",
          "[tuner][gpu-flow][gpu]") {
  Worker worker(qt::test::qtune_worker());
  std::string why;
  const auto gpu = worker_gpu(worker, why);
  if (!gpu) QTUNE_SKIP(why);
  const winners::DeviceFingerprint& dev = *gpu;
  REQUIRE(dev.arch.rfind("sm_", 0) == 0);
  REQUIRE(dev.sm_count > 0);
  REQUIRE(dev.l2_bytes > 0);
  REQUIRE(dev.bus_width_bits > 0);
  REQUIRE(dev.mem_clock_mhz > 0);
  REQUIRE(!dev.driver.empty());
  REQUIRE(!dev.cuda_version.empty());

  auto mf = ModelFile::open(qt::source_root() + "/tests/golden/files/dense-tied.ak48");
  GpuTuningOptions o;
  o.device = "cuda";
  o.target_sm = std::stoi(dev.arch.substr(3));
  o.families = {"awq_gemv", "awq_gemm"};
  o.buckets = {1, 16};
  o.budget = "2";
  o.quiet = true;
  o.compile_threads = 2;
  o.tune.strategy = "random";
  o.tune.timeout_s = 60;
  o.tune.flush = true;
  o.tune.measure.min_reps = 5;
  const auto jobs = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  Store store(test::tuner_scratch("gpu-flow-cuda", ".sqlite"));
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "test");
  for (const TuneReport& r : res.reports) {
    REQUIRE(r.best_point);
    REQUIRE(r.best_stats.n >= 5);
    REQUIRE(r.best_stats.median > 0);
    REQUIRE(r.best_stats.median < 1.0);  // a tiny GEMV/GEMM: microseconds, not host round trips of seconds
    REQUIRE(r.best_stats.ci_low <= r.best_stats.median);
    REQUIRE(r.best_stats.median <= r.best_stats.ci_high);
  }
  REQUIRE(!res.dispatch_lines.empty());
  for (const ResultRow& row : store.rows()) REQUIRE(row.device.key() == dev.key());
}

TEST_CASE("on a GPU the cuBLASLt baselines are verified, timed and ranked in the stored dispatch", "[tuner][gpu-flow][gpu]") {
  Worker worker(qt::test::qtune_worker());
  std::string why;
  const auto gpu = worker_gpu(worker, why);
  if (!gpu) QTUNE_SKIP(why);
  const winners::DeviceFingerprint& dev = *gpu;
  struct Case {
    std::string model;
    bool weights;  // false: the config's shapes alone (no golden file holds dense INT8 group-wise weights)
    std::vector<std::string> families;
    std::string baseline, dispatch;
  };
  const std::vector<Case> cases = {
      {"dense-tied.ak48", true, {"awq_gemv", "awq_gemm"}, "cuda.awq_dequant_cublaslt", "linear AWQ_INT4"},
      {"dense-tied.ak48", true, {"awq_frag_gemv", "awq_frag_gemm"}, "cuda.awq_frag_dequant_cublaslt",
       "linear.frag AWQ_INT4"},
      {"dense.ajc1", true, {"q8_0_gemv", "q8_0_gemm"}, "cuda.q8_0_dequant_cublaslt", "linear Q8_0"},
      {"dense.ajc1", false, {"int8gw_frag_gemv", "int8gw_frag_gemm"}, "cuda.int8gw_dequant_cublaslt",
       "linear.frag INT8_GW_SYM"}};
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.baseline) {
      auto mf = ModelFile::open(qt::source_root() + "/tests/golden/files/" + c.model);
      GpuTuningOptions o;
      o.device = "cuda";
      o.target_sm = std::stoi(dev.arch.substr(3));
      o.families = c.families;
      o.buckets = {1, 64};
      o.budget = "2";
      o.quiet = true;
      o.baselines = true;
      o.tune.strategy = "random";
      o.tune.timeout_s = 60;
      o.tune.flush = true;
      const auto jobs = plan_gpu_jobs(mf->config(), c.weights ? &mf->weights() : nullptr, o);
      Store store(test::tuner_scratch("gpu-flow-cuda-blas-" + c.families.front(), ".sqlite"));
      const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "test");
      bool timed = false;
      for (size_t i = 0; i < jobs.size(); ++i)
        if (jobs[i].family->name() == c.baseline) {
          INFO(c.baseline << " " << shape_text(jobs[i].shape));
          REQUIRE(res.reports[i].best_point);  // verified against the problem family's CPU reference
          timed = true;
        }
      REQUIRE(timed);
      bool ranked = false;
      for (const std::string& line : res.dispatch_lines) ranked |= line.find(c.dispatch + " ") != std::string::npos;
      INFO(c.dispatch);
      REQUIRE(ranked);
    }
  }
}
