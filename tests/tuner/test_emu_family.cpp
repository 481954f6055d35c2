// The emu device: GPU kernel families from kernels_src/registry compiled by the host JIT, run on the CPU
// emulator in the worker, and verified against each family's reference (correctness only).
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>

#include "tests/tuner/run_qtune.h"
#include "tuner/family/candidate.h"
#include "tuner/family/family.h"

using namespace qt::tune;

namespace {
// Two random points, each run once: emulation is slow and its timing means nothing.
TuneOptions two_points_once(uint64_t seed) {
  TuneOptions opt;
  opt.strategy = "random";
  opt.seed = seed;
  opt.budget = {2, -1};
  opt.timeout_s = 300;
  opt.measure.warmup = 0;
  opt.measure.min_reps = opt.measure.max_reps = 1;
  opt.measure.min_seconds = 0;
  opt.measure.racing = false;
  return opt;
}
}  // namespace

TEST_CASE("GPU family points run on the emulator in a worker and verify against the reference", "[tuner][emu]") {
  auto names = family_names("emu");
  REQUIRE(std::find(names.begin(), names.end(), "emu.awq_gemv") != names.end());
  auto fam = find_family("emu.awq_gemv");
  std::vector<int64_t> shape = {1, 256, 256, 128};
  Space space = fam->space(shape);
  REQUIRE(space.size() > 1);
  Worker worker(qt::test::qtune_worker());
  const TuneOptions opt = two_points_once(TuneOptions{}.seed);
  std::vector<CandidateOutcome> outcomes;
  TuneReport rep = tune_shape(*fam, shape, worker, opt,
                              [&](const nlohmann::json&, const CandidateOutcome& o) { outcomes.push_back(o); });
  REQUIRE(rep.evaluations == 2);
  for (const auto& o : outcomes) {
    INFO(o.detail);
    REQUIRE(o.status == Status::Ok);
  }
}

TEST_CASE("emu shapes violating a family's shape constraint are not in its space", "[tuner][emu]") {
  auto fam = find_family("emu.awq_gemv");
  // The GEMV serves M <= 8: no point can run M = 9, and split_k is capped by the number of K groups.
  REQUIRE(fam->space({9, 256, 256, 128}).size() == 0);
  REQUIRE(fam->space({1, 256, 256, 128}).size() < fam->space({1, 256, 2048, 128}).size());
}

TEST_CASE("with a target GPU, points are compiled by NVRTC in the worker and screened before emulation",
          "[tuner][emu]") {
  auto fam = find_family("emu.awq_gemv", 86);
  Worker worker(qt::test::qtune_worker());
  const TuneOptions opt = two_points_once(3);
  int screened = 0;
  tune_shape(*fam, {1, 256, 256, 128}, worker, opt, [&](const nlohmann::json&, const CandidateOutcome& o) {
    INFO(o.detail);
    // A point either passes the sm_86 screen and verifies on the emulator, or is pruned with its reason.
    REQUIRE((o.status == Status::Ok || (o.status == Status::ResourceFailed && o.detail.find("sm_86") != std::string::npos)));
    ++screened;
  });
  REQUIRE(screened == 2);
}

TEST_CASE("an emulator candidate killed at its timeout costs only its worker: the next worker sets the job up "
          "again and verifies the same candidate",
          "[tuner][emu][worker]") {
  auto fam = find_family("emu.awq_frag_gemv");
  const std::vector<int64_t> shape = {4, 128, 4096, 128};
  nlohmann::json point = nlohmann::json::object();
  for (const auto& [name, value] : fam->family().default_point()) point[name] = value;
  const nlohmann::json setup = {{"op", "setup"}, {"family", fam->name()}, {"target_sm", 0}, {"shape", shape}};
  const nlohmann::json candidate = {{"family", fam->name()},
                                    {"target_sm", 0},
                                    {"shape", shape},
                                    {"point", point},
                                    {"flush", false},
                                    {"measure", {{"warmup", 0}, {"min_reps", 1}, {"max_reps", 1}, {"min_seconds", 0}}}};
  Worker worker(qt::test::qtune_worker());
  const WorkerReply first = worker.call(setup.dump(), 600);
  REQUIRE(first.kind == WorkerReply::Ok);
  CHECK(SetupCosts::from_json(nlohmann::json::parse(first.payload)).reference_on == "cpu");
  const pid_t first_pid = worker.pid();
  // Killed while compiling or emulating: no emulated GPU kernel answers in 10 ms.
  const WorkerReply killed = worker.call(candidate.dump(), 0.01);
  REQUIRE(killed.kind == WorkerReply::TimedOut);
  CHECK(kill(first_pid, 0) != 0);  // reaped
  REQUIRE(worker.call(setup.dump(), 600).kind == WorkerReply::Ok);
  CHECK(worker.pid() != first_pid);
  const WorkerReply ok = worker.call(candidate.dump(), 600);
  REQUIRE(ok.kind == WorkerReply::Ok);
  const CandidateOutcome o = CandidateOutcome::from_json(nlohmann::json::parse(ok.payload));
  INFO(o.detail);
  CHECK(o.status == Status::Ok);
  CHECK(o.phases.verify > 0);
  CHECK(worker.spawned() == 2);
}

TEST_CASE("jobs of one problem and shape share one reference and still verify against it", "[tuner][emu]") {
  // The H200 tune spent 108 of its 138 s on references, computing the same linear for each family that
  // serves it. The frag GEMV and the stream GEMV solve one problem (exact weights), the mma.sync and wgmma
  // GEMMs another (weights rounded to fp16): one reference each per shape, whatever the order of the jobs.
  reset_reference_memo(size_t(1) << 30);
  const std::vector<int64_t> shape = {2, 64, 1024, 128};
  std::vector<std::shared_ptr<Tunable>> families;  // an instance refers to its family
  auto setup = [&](const std::string& name, int sm) {
    families.push_back(find_family(name, sm));
    auto instance = families.back()->instantiate(shape);
    return std::make_pair(instance->setup(), std::move(instance));
  };
  auto [gemv, gemv_instance] = setup("emu.awq_frag_gemv", 0);
  auto [gemm, gemm_instance] = setup("emu.awq_frag_gemm", 0);
  auto [stream, stream_instance] = setup("emu.awq_frag_stream_gemv", 0);
  auto [wgmma, wgmma_instance] = setup("emu.awq_frag_wgmma_gemm", 90);
  auto [again, again_instance] = setup("emu.awq_frag_gemv", 0);
  CHECK(gemv.references_computed == 1);
  CHECK(gemm.references_computed == 1);
  CHECK(stream.references_shared == 1);
  CHECK(stream.references_computed == 0);
  CHECK(wgmma.references_shared == 1);
  CHECK(again.references_shared == 1);
  CHECK(stream.reference == 0);
  const ReferenceMemoStats stats = reference_memo_stats();
  CHECK(stats.computed == 2);
  CHECK(stats.shared == 3);
  CHECK(stream_instance->reference() == gemv_instance->reference());
  CHECK(wgmma_instance->reference() == gemm_instance->reference());
  CHECK(gemv_instance->reference() != gemm_instance->reference());
  // Another batch is another reference.
  const std::vector<int64_t> other = {3, 64, 1024, 128};
  auto fam = find_family("emu.awq_frag_stream_gemv");
  CHECK(fam->instantiate(other)->setup().references_computed == 1);
  // A candidate of the family that did not compute the reference is checked against it.
  const auto point = fam->family().default_points(fam->family().shape(shape)).front();
  nlohmann::json p;
  for (const auto& [k, v] : point) p[k] = v;
  stream_instance->prepare(p);
  stream_instance->run();
  CHECK(stream_instance->verify() == "");
}

TEST_CASE("the reference memo keeps the most recent references within its budget", "[tuner][emu]") {
  reset_reference_memo(1);  // one byte: only the last one made stays
  auto fam = find_family("emu.awq_frag_gemv");
  fam->instantiate({1, 64, 256, 128})->setup();
  fam->instantiate({2, 64, 256, 128})->setup();
  CHECK(fam->instantiate({2, 64, 256, 128})->setup().references_shared == 1);
  CHECK(fam->instantiate({1, 64, 256, 128})->setup().references_computed == 1);
  CHECK(reference_memo_stats().entries == 1);
  reset_reference_memo(size_t(4) << 30);
}
