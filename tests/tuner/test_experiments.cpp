// Experiments (tuner/flow/experiments.h): the points a file lists, measured as listed through the GPU flow on
// the emulator, and every mistake in such a file refused with the experiment and the problem named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"
#include "common/paths.h"
#include "tests/tuner/emu_flow_options.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"
#include "tests/worker_entry.h"
#include "tuner/flow/experiments.h"

using namespace qt;
using namespace qt::tune;

namespace {

const nlohmann::json kDoc = nlohmann::json::parse(R"({"experiments": [
  {"why": "is the frag GEMV latency-bound?", "family": "awq_frag_gemv",
   "shape": {"M": 1, "N": 128, "K": 512, "G": 128}, "points": [{}, {"split": 2}, {"warps": 2}]},
  {"why": "does the stream GEMV lose a wave?", "family": "awq_frag_stream_gemv",
   "shapes": [{"G": 128, "K": 512, "N": 128, "M": 1}], "points": [{"split": 1}, {}]}]})");

using Run = qt::test::QtuneRun;
Run qtune_with(const std::string& env, const std::string& args) { return qt::test::run_qtune(args, env); }
Run qtune(const std::string& args) { return qtune_with("", args); }

std::string plan_error(const std::string& doc) {
  try {
    plan_experiment_jobs(nlohmann::json::parse(doc), "emu", 80);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("an experiment's points are the family's default with the listed changes, in the file's order",
          "[tuner][experiments]") {
  const std::vector<GpuJob> jobs = plan_experiment_jobs(kDoc, "emu", 80);
  REQUIRE(jobs.size() == 2);
  const GpuJob& frag = jobs[0];
  REQUIRE(frag.family->family().name == "awq_frag_gemv");
  REQUIRE(frag.shape == std::vector<int64_t>{1, 128, 512, 128});
  REQUIRE(frag.budget == 3);
  REQUIRE(frag.listed_text == std::vector<std::string>{"default", "split=2", "warps=2"});
  const kernels::KernelFamily& f = frag.family->family();
  // The first default point that runs the shape (the first in the list does not: its split exceeds 4 groups).
  const Space space = frag.family->space(frag.shape);
  std::set<kernels::Point> runs;
  for (PointId id = 0; id < space.size(); ++id) runs.insert(frag.family->to_point(nlohmann::json::parse(space.point_json(id))));
  kernels::Point base;
  for (const kernels::Point& d : f.default_points(f.shape(frag.shape)))
    if (runs.count(d)) {
      base = d;
      break;
    }
  REQUIRE(!base.empty());
  CHECK(base != f.default_points(f.shape(frag.shape)).front());
  INFO(kernels::point_key(frag.listed[0]) + " against " + kernels::point_key(base));
  CHECK(frag.listed[0] == base);
  kernels::Point split2 = base;
  split2["split"] = 2;
  CHECK(frag.listed[1] == split2);
  // The shape's dimensions in the family's order, whatever the file's.
  REQUIRE(jobs[1].shape == std::vector<int64_t>{1, 128, 512, 128});
  REQUIRE(jobs[1].listed_text == std::vector<std::string>{"split=1", "default"});
  CHECK(jobs[1].why == "does the stream GEMV lose a wave?");
}

TEST_CASE("every mistake in an experiments file is an error naming the experiment and the problem",
          "[tuner][experiments]") {
  const std::string head = R"({"experiments": [{"why": "w", )";
  const std::string frag = R"("family": "awq_frag_gemv", )";
  const std::string shape = R"("shape": {"M": 1, "N": 128, "K": 512, "G": 128}, )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"runs": []})", "an experiments file is"},
      {R"({"experiments": []})", "lists no experiment"},
      {R"({"experiments": [{"family": "awq_frag_gemv"}]})", "experiment 1: \"why\" must say"},
      {head + R"("family": "awq_nope", )" + shape + R"("points": [{}]}]})", "awq_nope"},
      {head + R"("family": "cublaslt_f16", )" + shape + R"("points": [{}]}]})", "cuBLASLt baseline"},
      {head + frag + R"("shape": {"M": 1, "N": 128, "K": 512}, "points": [{}]}]})", "the shape has no G"},
      {head + frag + R"("shape": {"M": 1, "N": 128, "K": 512, "G": 128, "T": 2}, "points": [{}]}]})",
       "has no dimension T"},
      {head + frag + R"("shape": {"M": 0, "N": 128, "K": 512, "G": 128}, "points": [{}]}]})", "positive integer"},
      {head + frag + shape + R"("points": []}]})", "at least one point"},
      {head + frag + shape + R"("points": [{"depth": 2}]}]})", "has no parameter depth"},
      {head + frag + shape + R"("points": [{"split": 3}]}]})", "split=3 is not in its values"},
      {head + frag + shape + R"("points": [{"split": 16}]}]})", "at M=1 N=128 K=512 G=128: point {\"split\":16} cannot run it: split"},
      {head + frag + R"("points": [{}]}]})", "give \"shape\" (one) or \"shapes\" (a list), not neither"},
      {head + frag + shape + R"("shapes": [], "points": [{}]}]})", "not both"},
      {head + frag + R"("shapes": [], "points": [{}]}]})", "at least one shape"},
      {R"({"experiments": [], "notes": 1})", "unknown top-level field \"notes\""},
      // The default at this shape has one split (its first default's 8 exceed the 4 groups): no reduction.
      {head + frag + shape + R"("points": [{"ru": 4}]}]})", "split=1 has no reduction: ru must be 1"},
      {head + frag + shape + R"("points": [{}, {}]}]})", "listed twice"},
      {head + frag + shape + R"("points": [{}], "budget": 4}]})", "unknown field \"budget\""},
  };
  for (const auto& [doc, expected] : cases) {
    INFO(doc);
    const std::string got = plan_error(doc);
    INFO(got);
    CHECK(got.find(expected) != std::string::npos);
  }
  // The experiment is named by its index and question.
  CHECK(plan_error(head + frag + shape + R"("points": [{"split": 3}]}]})").find("experiment 1 (w)") != std::string::npos);
  // A family of a later architecture than the target is refused for it.
  const std::string hopper = R"({"experiments": [{"why": "w", "family": "awq_frag_wgmma_gemm", "shape":
      {"M": 64, "N": 128, "K": 512, "G": 128}, "points": [{}]}]})";
  CHECK(plan_error(hopper).find("needs sm_90") != std::string::npos);
}

TEST_CASE("the GPU flow measures an experiment's points and nothing else, stores no dispatch, and resumes them",
          "[tuner][experiments]") {
  const std::vector<GpuJob> jobs = plan_experiment_jobs(kDoc, "emu", 80);
  Store store(test::tuner_scratch("experiments", ".sqlite"));
  Worker worker(qt::test::qtune_worker());
  const winners::DeviceFingerprint dev = worker_device_fingerprint(worker, "emu", 80);
  GpuTuningOptions o = test::emu_flow_options();
  o.store_dispatch = false;
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, o, "experiments");
  REQUIRE(res.measured == 5);
  REQUIRE(res.statuses.at("ok") == 5);
  REQUIRE(store.count() == 5);
  for (const GpuJob& j : jobs) {
    std::set<kernels::Point> stored;
    for (const ResultRow& r : store.rows(j.family->name())) stored.insert(j.family->to_point(r.point));
    CHECK(stored == std::set<kernels::Point>(j.listed.begin(), j.listed.end()));
  }
  CHECK(store.dispatch_rows().empty());
  CHECK(res.dispatch_lines.empty());

  const std::vector<std::string> lines = experiment_lines(jobs, store, dev, false);
  REQUIRE(lines.size() == 2 + 5);
  CHECK(lines[0] == "experiment: is the frag GEMV latency-bound?");
  CHECK(lines[2].find("split=2") != std::string::npos);
  for (const std::string& l : lines)
    if (l.rfind("  ", 0) == 0) CHECK(l.find("verified") != std::string::npos);

  const GpuTuningResult again = tune_gpu_jobs(jobs, store, worker, dev, o, "again");
  CHECK(again.measured == 0);
  CHECK(again.resumed == 5);
}

TEST_CASE("qtune --points runs an experiments file on the emulator and refuses what it cannot mean",
          "[tuner][experiments][cli]") {
  const std::string file = test::tuner_scratch("experiments-cli", ".json");
  {
    std::ofstream out(file);
    out << kDoc.dump(2);
  }
  const std::string store = test::tuner_scratch("experiments-cli", ".sqlite");
  const Run run = qtune("--device emu --gpu sm80 --points " + file + " --cache " + store + " --quiet");
  INFO(run.out);
  REQUIRE(run.rc == 0);
  CHECK(run.out.find("experiment: does the stream GEMV lose a wave?") != std::string::npos);
  CHECK(run.out.find("5 candidates measured") != std::string::npos);
  CHECK(run.out.find("dispatch:") == std::string::npos);

  const Run with_model = qtune("--device emu --gpu sm80 --points " + file + " --model x.bin --cache " + store);
  CHECK(with_model.rc != 0);
  CHECK(with_model.out.find("drop --model") != std::string::npos);
  const Run with_family = qtune("--device emu --gpu sm80 --family awq_frag_gemv --points " + file + " --cache " + store);
  CHECK(with_family.rc != 0);
  CHECK(with_family.out.find("drop --family") != std::string::npos);
  const Run no_gpu = qtune("--device emu --points " + file + " --cache " + store);
  CHECK(no_gpu.rc != 0);
  CHECK(no_gpu.out.find("--points needs --gpu") != std::string::npos);
  // On cuda without a GPU (the driver pointed at nothing): exit 3, nothing measured.
  const Run cuda = qtune_with("QTUNE_LIBCUDA=/nonexistent/libcuda.so.1", "--gpu sm90 --points " + file + " --cache " +
                              test::tuner_scratch("experiments-cli-cuda", ".sqlite") + " --quiet");
  INFO(cuda.out);
  CHECK(cuda.rc == 3);
}

TEST_CASE("one experiment over several shapes is a job at each, with the same points", "[tuner][experiments]") {
  const std::vector<GpuJob> jobs = plan_experiment_jobs(nlohmann::json::parse(R"({"about": "x", "experiments": [
    {"why": "w", "family": "awq_frag_stream_gemv", "shapes": [{"M": 1, "N": 128, "K": 512, "G": 128},
     {"M": 2, "N": 256, "K": 512, "G": 128}], "points": [{}, {"split": 1}]}]})"), "emu", 80);
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[1].shape == std::vector<int64_t>{2, 256, 512, 128});
  CHECK(jobs[0].listed_text == jobs[1].listed_text);
  CHECK(jobs[0].why == jobs[1].why);
}

TEST_CASE("every experiments file the GPU run measures plans on its architecture", "[tuner][experiments]") {
  // scripts/gpu/experiments/smNN.json: a kernel change that drops one of its points fails here, not on a GPU.
  namespace fs = std::filesystem;
  int files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(source_root() + "/scripts/gpu/experiments")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    INFO(name);
    REQUIRE(name.rfind("sm", 0) == 0);
    const int sm = std::stoi(name.substr(2));
    const std::vector<GpuJob> jobs = read_experiment_jobs(e.path().string(), "cuda", sm);
    CHECK(!jobs.empty());
    for (const GpuJob& j : jobs) CHECK(!j.why.empty());
    ++files;
  }
  CHECK(files >= 1);
}
