// The GPU tuning flow (qtune --model X --gpu smNN) run on the emulator: every family, shape and batch bucket
// tuned and stored with a batch dispatch, a crashing candidate costing only its worker, a wrong one never
// winning, and a run stopped half-way resuming from the store instead of measuring again.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "device/blas/blas_lt.h"
#include "kernels_src/registry/registry.h"
#include "models/formats/model_file.h"
#include "tests/tuner/emu_flow_options.h"
#include "tests/tuner/run_qtune.h"
#include "tests/worker_entry.h"
#include "tests/tuner/scratch_path.h"
#include "tuner/family/blas_baselines.h"
#include "tuner/flow/gpu_tuning.h"
#include "common/paths.h"

using namespace qt;
using namespace qt::tune;

namespace {

const std::string kModel = qt::source_root() + "/tests/golden/files/dense-tied.ak48";

GpuTuningOptions emu_options(std::vector<std::string> families, std::vector<int64_t> buckets, std::string budget) {
  GpuTuningOptions o = test::emu_flow_options();
  o.families = std::move(families);
  o.buckets = std::move(buckets);
  o.budget = std::move(budget);
  o.tune.strategy = "random";
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
  // q, k and v concatenated (models/core/linear_shapes.h) run at one row only: bucket 1, in both families.
  const int64_t qkv_n = mf->config().q_dim() + 2 * mf->config().kv_dim();
  int qkv_jobs = 0;
  for (const GpuJob& j : jobs) {
    if (j.shape[1] == qkv_n) {
      CHECK(j.shape[0] == 1);
      ++qkv_jobs;
      continue;
    }
    (j.family->family().name == "awq_gemv" ? gemv_shapes : gemm_shapes).insert(j.shape);
  }
  REQUIRE(qkv_jobs == 2);
  // The GEMV serves M <= 8 only, so bucket 16 is the GEMM's alone.
  for (const auto& s : gemv_shapes) REQUIRE(s[0] <= 8);
  REQUIRE(gemm_shapes.size() == 3 * gemv_shapes.size() / 2);

  Store store(test::tuner_scratch("gpu-flow", ".sqlite"));
  Worker worker(qt::test::qtune_worker());
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 86);
  REQUIRE(dev.arch == "sm_86");
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "test");
  REQUIRE(res.measured == int64_t(jobs.size()));
  for (const TuneReport& r : res.reports) REQUIRE(r.best_point);
  // Every job gets its model correlation entry (NaN here: one measured point per job).
  REQUIRE(res.model_rank_correlation.size() == jobs.size());
  REQUIRE(store.count() == int64_t(jobs.size()));
  // One dispatch line per linear shape (the concatenated q/k/v's too), and each shape's buckets are stored ranked.
  REQUIRE(res.dispatch_lines.size() == gemv_shapes.size() / 2 + 1);
  const auto& any = *gemv_shapes.begin();
  const auto entries = store.dispatch(dev, "linear", "AWQ_INT4", {any.begin() + 1, any.end()});
  REQUIRE(entries.size() == 3);
  REQUIRE(entries[0].ranking.size() == 2);  // both families measured at M=1
  REQUIRE(entries[2].bucket == 16);
  REQUIRE(entries[2].ranking.size() == 1);
  REQUIRE(entries[2].ranking[0].family == "emu.awq_gemm");
  // Its job's buffers freed into the emulator after the emulator's own teardown once aborted the worker here.
  CHECK(worker.finish() == "exited with status 0");
}

// The worker program registers the scripted family first: it shares nothing with the test that starts it.
QTUNE_TEST_WORKER(faulty, [](const std::string& request) {
  kernels::add_family(&faulty_gemv());
  return handle_candidate_request(request);
});

TEST_CASE("in the GPU flow a faulting candidate kills only its worker and a wrong one never wins", "[tuner][gpu-flow]") {
  kernels::add_family(&faulty_gemv());
  auto mf = ModelFile::open(kModel);
  GpuTuningOptions o = emu_options({"test.awq_gemv_faulty"}, {1}, "100%");
  o.tune.strategy = "exhaustive";
  const std::vector<GpuJob> jobs = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  REQUIRE(!jobs.empty());
  Store store(test::tuner_scratch("gpu-flow-faults", ".sqlite"));
  Worker worker(qt::test::test_worker("faulty"));
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
  // The first worker, then one after each fault: the candidate's, and the roofline prior's, which runs the
  // family's plan in the worker too and so meets the same abort once per job.
  REQUIRE(worker.spawned() == 1 + 2 * int(jobs.size()));
}

TEST_CASE("a GPU tuning run stopped half-way resumes from the store and measures only what is left",
          "[tuner][gpu-flow]") {
  auto mf = ModelFile::open(kModel);
  const std::vector<std::string> families = {"awq_gemv"};
  // Stopped after the first candidate of every job (a run with budget 1), then started again with 3.
  Store resumed(test::tuner_scratch("gpu-flow-resumed", ".sqlite"));
  Worker worker(qt::test::qtune_worker());
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

namespace {

using Run = qt::test::QtuneRun;
Run qtune_with(const std::string& env, const std::string& args) { return qt::test::run_qtune(args, env); }
Run qtune(const std::string& args) { return qtune_with("", args); }

}  // namespace

TEST_CASE("qtune --gpu without a GPU prints the static table and exits 3, with --static-only it exits 0", "[tuner][gpu-flow][cli]") {
  const std::string store = test::tuner_scratch("gpu-flow-cli-nogpu", ".sqlite");
  // The driver is pointed at a file that does not exist, so the answer is the same on a machine with a GPU.
  const Run n = qtune_with("QTUNE_LIBCUDA=/nonexistent/libcuda.so.1", "--model " + kModel + " --gpu sm86 --cache " +
                           store + " --quiet");
  INFO(n.out);
  REQUIRE(n.rc == 3);
  REQUIRE(n.out.find("compile: ") != std::string::npos);  // the static table's summary line
  REQUIRE(n.out.find("nothing was tuned") != std::string::npos);
  const Run s = qtune("--model " + kModel + " --gpu sm86 --static-only --cache " + store);
  INFO(s.out);
  REQUIRE(s.rc == 0);
  REQUIRE(s.out.find("compile: ") != std::string::npos);
}

TEST_CASE("qtune --device emu --model X --gpu smNN runs the GPU flow and a second run resumes it from the store",
          "[tuner][gpu-flow][cli]") {
  const std::string store = test::tuner_scratch("gpu-flow-cli-emu", ".sqlite");
  const std::string args = "--device emu --model " + kModel + " --gpu sm86 --families awq_gemv --buckets 1,2 --budget 2 "
                           "--strategy random --cache " + store + " --quiet";
  const Run first = qtune(args);
  INFO(first.out);
  REQUIRE(first.rc == 0);
  // (3 shapes x 2 buckets + the concatenated q/k/v at bucket 1) x 2
  REQUIRE(first.out.find("14 candidates measured, 0 resumed") != std::string::npos);
  REQUIRE(first.out.find("dispatch: linear AWQ_INT4") != std::string::npos);
  const Run again = qtune(args);
  INFO(again.out);
  REQUIRE(again.rc == 0);
  REQUIRE(again.out.find("0 candidates measured, 14 resumed") != std::string::npos);
}

TEST_CASE("on cuda the GPU flow times the cuBLASLt baselines at every linear job's shape, and fp16 ones with --predequantize",
          "[tuner][gpu-flow]") {
  // Planning needs no GPU: it only builds each family's space for each shape.
  auto mf = ModelFile::open(qt::source_root() + "/tests/golden/files/dense-tied.ak48");
  GpuTuningOptions o;
  o.device = "cuda";
  o.target_sm = 90;
  o.families = {"awq_gemv", "awq_gemm", "f16_gemv", "f16_gemm"};
  o.buckets = {1, 64};
  o.budget = "2";
  auto count = [](const std::vector<GpuJob>& jobs, const std::string& family, const std::vector<int64_t>* shape = nullptr) {
    int n = 0;
    for (const GpuJob& j : jobs) n += j.family->name() == family && (!shape || j.shape == *shape);
    return n;
  };
  const auto plain = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  CHECK(count(plain, "cuda.awq_dequant_cublaslt") == 0);
  o.baselines = true;
  const auto with = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  // Every AWQ linear job has the dequant + cuBLASLt baseline beside it at the same shape, and every fp16 one
  // (the tied lm_head is fp16 in ak48) has cuBLASLt; the baseline's space is the heuristic's ranks.
  for (const GpuJob& j : plain) {
    INFO(j.family->name() << " " << j.shape[0] << "x" << j.shape[1] << "x" << j.shape[2]);
    if (j.family->family().weight_types == std::vector<WeightType>{WeightType::AWQ_INT4})
      CHECK(count(with, "cuda.awq_dequant_cublaslt", &j.shape) == 1);
    if (j.family->family().weight_types == std::vector<WeightType>{WeightType::F16})
      CHECK(count(with, "cuda.cublaslt_f16", &j.shape) == 1);
  }
  for (const GpuJob& j : with)
    if (j.family->name() == "cuda.cublaslt_f16") CHECK(j.family->space(j.shape).size() == 4);
  // --predequantize: each quantized linear shape is also tuned as fp16 (G = K) on our kernels and cuBLASLt.
  o.predequantize = true;
  const auto pre = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  for (const GpuJob& j : plain) {
    if (j.family->family().weight_types != std::vector<WeightType>{WeightType::AWQ_INT4}) continue;
    const std::vector<int64_t> fp16{j.shape[0], j.shape[1], j.shape[2], j.shape[2]};
    CHECK(count(pre, "cuda.cublaslt_f16", &fp16) == 1);
    CHECK(count(pre, "cuda.f16_gemv", &fp16) + count(pre, "cuda.f16_gemm", &fp16) >= (j.shape[0] <= 8 ? 1 : 0));
  }
}

TEST_CASE("on cuda the GPU flow times AWQ, INT8 group-wise and Q8_0 dequant + cuBLASLt beside the families of their "
          "layout", "[tuner][gpu-flow]") {
  // The config alone gives every family its shapes (no weights: every type counts).
  auto mf = ModelFile::open(qt::source_root() + "/tests/golden/files/dense.ajc1");
  GpuTuningOptions o;
  o.device = "cuda";
  o.target_sm = 90;
  o.families = {"int8gw_frag_gemv", "int8gw_frag_gemm", "q8_0_gemv", "q8_0_gemm", "awq_frag_gemm"};
  o.buckets = {1, 512};
  o.budget = "2";
  o.baselines = true;
  const auto jobs = plan_gpu_jobs(mf->config(), nullptr, o);
  auto count = [&](const std::string& family, const std::vector<int64_t>& shape) {
    int n = 0;
    for (const GpuJob& j : jobs) n += j.family->name() == family && j.shape == shape;
    return n;
  };
  int int8 = 0, q8 = 0, awq = 0;
  for (const GpuJob& j : jobs) {
    const std::string& name = j.family->family().name;
    INFO(name << " " << shape_text(j.shape));
    if (name.starts_with("int8gw_frag_")) {
      CHECK(count("cuda.int8gw_dequant_cublaslt", j.shape) == 1);
      ++int8;
    }
    if (name.starts_with("q8_0_")) {
      CHECK(count("cuda.q8_0_dequant_cublaslt", j.shape) == 1);
      ++q8;
    }
    if (name == "awq_frag_gemm") {
      CHECK(count("cuda.awq_frag_dequant_cublaslt", j.shape) == 1);
      ++awq;
    }
    // Beside AWQ in the frag layout, not the file layout's baseline: awq_dequant reads the file layout.
    CHECK(name != "awq_dequant_cublaslt");
    // Each baseline ranks in the dispatch of the layout its dequant reads.
    if (name.ends_with("_dequant_cublaslt"))
      CHECK(j.family->family().op == (name.starts_with("q8_0_") ? "linear" : "linear.frag"));
  }
  CHECK(int8 > 0);
  CHECK(q8 > 0);
  CHECK(awq > 0);
}

TEST_CASE("each weight type and layout's cuBLASLt baseline is its row of device/blas's table", "[tuner][gpu-flow]") {
  CHECK(blas_baselines().size() == std::size(blas::kBaselines));
  for (const blas::Baseline& row : blas::kBaselines) {
    INFO(row.store_name);
    const kernels::KernelFamily* b = blas_baseline_for(row.weight_type, kernels::find_family(row.problem_family).op);
    REQUIRE(b);
    CHECK(b->name == row.store_name);
    CHECK(b == find_blas_baseline(row.store_name));
    CHECK(is_blas_baseline(*b));
    CHECK_FALSE(is_blas_baseline(kernels::find_family(row.problem_family)));
    // The problem family solves the same linear, so the baseline is stored and dispatched with it.
    const kernels::KernelFamily& problem = kernels::find_family(row.problem_family);
    CHECK(problem.serves(row.weight_type));
    CHECK(b->op == problem.op);
    CHECK(b->dtypes == problem.dtypes);
    if (!row.dequant_family) continue;
    const kernels::KernelFamily& dq = kernels::find_family(row.dequant_family);
    CHECK(dq.serves(row.weight_type));
    CHECK(dq.op.starts_with("dequant"));
    CHECK(kernels::op_weight_layout(dq.op) == kernels::op_weight_layout(problem.op));
  }
  CHECK(blas_baseline_for(WeightType::INT8_GW_SYM, "linear.frag")->name == "int8gw_dequant_cublaslt");
  CHECK(blas_baseline_for(WeightType::INT8_GW_SYM, "linear") == nullptr);  // no dequant reads its file layout
  CHECK(blas_baseline_for(WeightType::Q8_0, "linear")->name == "q8_0_dequant_cublaslt");
  CHECK(blas_baseline_for(WeightType::AWQ_INT4, "linear")->name == "awq_dequant_cublaslt");
  CHECK(blas_baseline_for(WeightType::AWQ_INT4, "linear.frag")->name == "awq_frag_dequant_cublaslt");
  CHECK(blas_baseline_for(WeightType::INT8_GW_ASYM, "linear") == nullptr);  // no dense layer of that type runs on a device
  CHECK(find_blas_baseline("awq_gemm") == nullptr);
  // A shape its dequant kernel cannot take is refused by the baseline, naming the kernel and why.
  const kernels::KernelFamily& int8 = *blas_baseline_for(WeightType::INT8_GW_SYM, "linear.frag");
  const kernels::Point rank0{{"rank", 0}};
  CHECK(int8.shape_constraint(rank0, int8.shape({64, 128, 4096, 128})) == "");
  CHECK_THAT(int8.shape_constraint(rank0, int8.shape({64, 100, 4096, 128})),
             Catch::Contains("int8gw_frag_dequant: N must be a multiple of 8"));
  const kernels::KernelFamily& q8 = *blas_baseline_for(WeightType::Q8_0, "linear");
  CHECK_THAT(q8.shape_constraint(rank0, q8.shape({64, 3, 5, 5})), Catch::Contains("q8_0_dequant: N*K must be a multiple"));
}

TEST_CASE("every family whose reference may run on the device, the cuBLASLt baselines too, names the small shape "
          "it is first checked on", "[tuner][gpu-flow]") {
  // A worker trusts a device reference on a large shape only after checking it against the CPU on this one. The
  // baselines once had none (an empty shape): on the H200 every baseline job of 2^26 MACs or more failed its setup.
  std::vector<const kernels::KernelFamily*> families = blas_baselines();
  for (const kernels::KernelFamily* f : kernels::all_families())
    if (f->linear_operands) families.push_back(f);
  CHECK(families.size() > blas_baselines().size());
  for (const kernels::KernelFamily* f : families) {
    INFO(f->name);
    REQUIRE(f->linear_operands);
    const kernels::Shape& small = device_reference_check_shape(*f);
    CHECK(small.names == f->dims);
    for (int64_t v : small.values) CHECK(v >= 0);
    // Its operands can be built there: what check_device_linear_sums runs.
    const kernels::LinearOperands ops = f->linear_operands(small, f->make_inputs(small, 1));
    CHECK(ops.m * ops.n * ops.k > 0);
  }
}

TEST_CASE("every cuBLASLt baseline on the emulator fails as a runtime error naming why, never as a result",
          "[tuner][gpu-flow]") {
  for (const kernels::KernelFamily* b : blas_baselines()) {
    INFO(b->name);
    auto t = find_family("emu." + b->name);
    auto inst = t->instantiate(b->name == blas::kStoreNameF16 ? std::vector<int64_t>{4, 64, 64, 64}
                                                               : std::vector<int64_t>{4, 64, 128, 32});
    try {
      inst->prepare(nlohmann::json{{"rank", 0}});
      FAIL("prepare succeeded without a GPU");
    } catch (const CandidateError& e) {
      CHECK(e.status == Status::RuntimeError);
      CHECK(std::string(e.what()).find("CUDA GPU only") != std::string::npos);
    }
  }
  CHECK_THROWS_WITH(find_family("cpu.cublaslt_f16"), Catch::Contains("run on a GPU device"));
}

// Catch2 2.13's console reporter loops forever wrapping a failing test's header when the name runs past two
// lines with an apostrophe near a line end: keep names short.
TEST_CASE("by default the GPU flow tunes a Q8_0 model's projections on the frag families, its lm_head on the file layout",
          "[tuner][gpu-flow]") {
  // dense.ajc1: Q8_0 throughout, the lm_head (N = 384) included. Planning needs no GPU.
  auto mf = ModelFile::open(qt::source_root() + "/tests/golden/files/dense.ajc1");
  const int64_t vocab = mf->config().vocab_size;
  GpuTuningOptions o;
  o.device = "cuda";
  o.buckets = {1, 64};
  o.budget = "1";
  for (int sm : {80, 90}) {
    INFO("sm_" << sm);
    o.target_sm = sm;
    std::map<std::string, std::set<bool>> lm_head;  // family -> whether each of its jobs is the lm_head's
    for (const GpuJob& j : plan_gpu_jobs(mf->config(), &mf->weights(), o))
      if (j.family->family().op == "linear" || j.family->family().op == "linear.frag" ||
          j.family->family().op == "gate_up_swiglu" || j.family->family().op == "gate_up_swiglu.frag")
        lm_head[j.family->name()].insert(j.shape[1] == vocab);
    for (const char* f : {"cuda.q8_0_frag_gemv", "cuda.q8_0_frag_gemm", "cuda.q8_0_frag_stream_gemv"}) {
      INFO(f);
      CHECK(lm_head[f] == std::set<bool>{false});
    }
    CHECK(lm_head["cuda.q8_0_frag_wgmma_gemm"] == (sm == 90 ? std::set<bool>{false} : std::set<bool>{}));
    for (const char* f : {"cuda.q8_0_gemv", "cuda.q8_0_gemm"}) {
      INFO(f);
      CHECK(lm_head[f] == std::set<bool>{true});
    }
    // The file layout's fused gate/up reads a layout the projections are no longer in; the frag one needs
    // whole 64-column tiles, which this model's 160 gate/up columns are not. No AWQ or INT8 weights.
    CHECK(lm_head.count("cuda.gate_up_swiglu.q8_0") == 0);
    CHECK(lm_head.count("cuda.q8_0_frag_gate_up_swiglu") == 0);
    for (const auto& [name, heads] : lm_head) CHECK(name.find("q8_0") != std::string::npos);
  }
}

namespace {

// The frag families an AWQ model's linears run on at sm_90 (decode GEMV, stream GEMV, mma.sync and wgmma
// GEMMs), at one weight shape of the model: four jobs of different families.
std::vector<GpuJob> frag_jobs_at_one_shape(const GpuTuningOptions& o) {
  auto mf = ModelFile::open(qt::source_root() + "/tests/golden/files/dense.ak48");
  std::vector<GpuJob> jobs = plan_gpu_jobs(mf->config(), &mf->weights(), o);
  const std::vector<int64_t> weight = {jobs.front().shape.begin() + 1, jobs.front().shape.end()};
  std::erase_if(jobs, [&](const GpuJob& j) { return std::vector<int64_t>(j.shape.begin() + 1, j.shape.end()) != weight; });
  return jobs;
}

// Each row's job (family and shape) and whether it is that job's first row, in the order they were stored.
std::vector<std::pair<std::string, bool>> rows_in_order(const Store& store) {
  std::vector<std::pair<std::string, bool>> out;
  std::set<std::string> seen;
  for (const ResultRow& r : store.rows()) {
    const std::string job = r.family + nlohmann::json(r.shape).dump();
    out.push_back({job, seen.insert(job).second});
  }
  return out;
}

}  // namespace

TEST_CASE("the GPU flow measures every job of every family once before any job gets a second candidate",
          "[tuner][gpu-flow]") {
  // The H200 tune walked the families one after another: with its time limit, the first three took all of it
  // and the stream GEMV and wgmma GEMM, the families that matter most on sm_90, were never started.
  GpuTuningOptions o = emu_options({"awq_frag_gemv", "awq_frag_gemm", "awq_frag_stream_gemv", "awq_frag_wgmma_gemm"},
                                   {1}, "2");
  o.target_sm = 90;
  const std::vector<GpuJob> jobs = frag_jobs_at_one_shape(o);
  std::set<std::string> families;
  for (const GpuJob& j : jobs) families.insert(j.family->name());
  REQUIRE(families.size() == 4);
  REQUIRE(jobs.size() == 4);
  Store store(test::tuner_scratch("gpu-flow-rounds", ".sqlite"));
  Worker worker(qt::test::qtune_worker());
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 90);
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "rounds");
  REQUIRE(res.measured == 8);
  const auto rows = rows_in_order(store);
  REQUIRE(rows.size() == 8);
  // Round 1: the four jobs' default points, each verified; round 2: their second candidates.
  std::set<std::string> ok_families;
  const std::vector<ResultRow> stored = store.rows();
  for (size_t i = 0; i < 4; ++i) {
    INFO(rows[i].first << ": " << stored[i].detail);
    CHECK(rows[i].second);
    if (stored[i].status == Status::Ok) ok_families.insert(stored[i].family);
    const kernels::KernelFamily& f = kernels::find_family(stored[i].family.substr(4));  // "emu."
    // The first of the family's default points this shape allows (a split the K groups cannot take is not).
    const kernels::Shape shape = f.shape(stored[i].shape);
    std::vector<kernels::Point> allowed = f.default_points(shape);
    std::erase_if(allowed, [&](const kernels::Point& p) { return f.shape_constraint && !f.shape_constraint(p, shape).empty(); });
    // (None: the search's first pick, as for the stream GEMV at K = 96, whose default splits need more groups.)
    if (!allowed.empty())
      CHECK(kernels::point_key(find_family(stored[i].family, 90)->to_point(stored[i].point)) == kernels::point_key(allowed.front()));
  }
  CHECK(ok_families == families);
  for (size_t i = 4; i < rows.size(); ++i) CHECK_FALSE(rows[i].second);
  // The jobs' own table keeps the plan's order.
  for (size_t i = 0; i < jobs.size(); ++i) CHECK(res.reports[i].shape == jobs[i].shape);
  CHECK(res.dispatch_lines.size() == 1);
}

TEST_CASE("a GPU flow cut short by its time limit gives no job a second candidate before every job its first and still stores the dispatch",
          "[tuner][gpu-flow]") {
  GpuTuningOptions o = emu_options({"awq_frag_gemv", "awq_frag_stream_gemv"}, {1}, "6");
  o.target_sm = 90;
  o.time_limit_s = 0.001;  // over before the second job: the first job is always started
  const std::vector<GpuJob> jobs = frag_jobs_at_one_shape(o);
  REQUIRE(jobs.size() == 2);
  Store store(test::tuner_scratch("gpu-flow-rounds-limit", ".sqlite"));
  Worker worker(qt::test::qtune_worker());
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 90);
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "limit");
  const auto rows = rows_in_order(store);
  REQUIRE_FALSE(rows.empty());
  size_t firsts = 0;
  for (const auto& [job, first] : rows) {
    if (!first) CHECK(firsts == jobs.size());
    firsts += first;
  }
  CHECK(res.unfinished_jobs == 1);
  CHECK(res.measured == 1);
  CHECK(res.dispatch_lines.size() == 1);
}

TEST_CASE("a job's setup the time limit cuts short is not stored, and the flow returns at the limit", "[tuner][gpu-flow]") {
  // The H200 run of 29 Nov: qtune --time-limit 105 was still in a job's setup at 120 s and was killed, storing
  // no dispatch. A 30B-A3B expert stack at 256 tokens: its inputs (400 MB of codes) and its CPU reference (6.4
  // billion multiply-adds) take seconds on any machine; the limit gives 1 s.
  GpuTuningOptions o = emu_options({"moe_gate_up.q8_0"}, {256}, "2");
  o.time_limit_s = 1;
  const std::vector<GpuJob> jobs = {GpuJob{find_family("emu.moe_gate_up.q8_0", 80), {256, 128, 8, 768, 2048, 64}, 2, true}};
  Store store(test::tuner_scratch("gpu-flow-setup-limit", ".sqlite"));
  Worker worker(qt::test::qtune_worker());
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 80);
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "setup-limit");
  INFO("returned after " << res.seconds << " s");
  CHECK(store.rows().empty());  // a cut is no property of a point: the same command measures it again
  CHECK(res.measured == 0);
  CHECK(res.unfinished_jobs == 1);
  CHECK(res.seconds < 30);  // the setup alone takes longer without the cut; the limit stops it at about 1 s
}
