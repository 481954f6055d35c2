// Crash isolation: candidates that segfault, abort, exit or hang kill only their worker; the tuning run
// records them and goes on to find the best correct point.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kernels_src/registry/registry.h"
#include "tuner/family/candidate.h"
#include "tests/skip.h"
#include "tuner/worker/worker.h"
#include "tests/worker_entry.h"

using namespace qt::tune;

QTUNE_TEST_WORKER(scripted, [](const std::string& req) -> std::string {
  if (req == "segv") raise(SIGSEGV);
  if (req == "abort") std::abort();
  if (req == "exit") _exit(3);
  if (req == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
  if (req == "throw") throw std::runtime_error("bad parameter");
  if (req == "pid") return std::to_string(getpid());
  if (req.rfind("mapped:", 0) == 0) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line))
      if (line.find(req.substr(7)) != std::string::npos) return std::string("mapped");
    return std::string("not mapped");
  }
  return "echo:" + req;
});

TEST_CASE("a worker answers requests, survives handler exceptions, and is replaced after a crash", "[tuner][worker]") {
  Worker w(qt::test::test_worker("scripted"));
  WorkerReply a = w.call("hello", 5);
  REQUIRE(a.kind == WorkerReply::Ok);
  REQUIRE(a.payload == "echo:hello");
  std::string pid1 = w.call("pid", 5).payload;
  REQUIRE(pid1 != std::to_string(getpid()));  // the handler ran in another process

  WorkerReply t = w.call("throw", 5);
  REQUIRE(t.kind == WorkerReply::HandlerError);
  REQUIRE(t.payload == "bad parameter");
  REQUIRE(w.call("pid", 5).payload == pid1);  // an exception does not cost the worker

  WorkerReply s = w.call("segv", 5);
  REQUIRE(s.kind == WorkerReply::Crashed);
  REQUIRE(s.reason.find("SIGSEGV") != std::string::npos);
  WorkerReply ab = w.call("abort", 5);
  REQUIRE(ab.kind == WorkerReply::Crashed);
  REQUIRE(ab.reason.find("SIGABRT") != std::string::npos);
  WorkerReply ex = w.call("exit", 5);
  REQUIRE(ex.kind == WorkerReply::Crashed);
  REQUIRE(ex.reason.find("status 3") != std::string::npos);

  auto t0 = std::chrono::steady_clock::now();
  WorkerReply h = w.call("hang", 0.3);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(h.kind == WorkerReply::TimedOut);
  REQUIRE(waited < 3.0);
  REQUIRE(waited >= 0.3);

  WorkerReply after = w.call("still there?", 5);
  REQUIRE(after.kind == WorkerReply::Ok);
  REQUIRE(after.payload == "echo:still there?");
  REQUIRE(w.spawned() == 5);  // first + one per crash/hang
  pid_t last = w.pid();
  REQUIRE(kill(last, 0) == 0);
}

namespace {

// A host family whose point decides what the candidate does, to drive the real tuning loop.
class MisbehavingKernel : public qt::kernels::HostKernel {
 public:
  MisbehavingKernel(int v, qt::kernels::HostBuffers& b) : v_(v), out_(reinterpret_cast<float*>(b.at("y").data())) {}
  double run() override {
    switch (v_) {
      case 0: raise(SIGSEGV); break;
      case 1: std::abort();
      case 2: std::this_thread::sleep_for(std::chrono::hours(1)); break;
      case 3: out_[0] = 99; return 1e-3;  // wrong result
      default: break;
    }
    for (int i = 0; i < 8; ++i) out_[i] = 1.0f;
    return 1e-3 * (1 + std::abs(v_ - 7));  // 7 is the fastest correct point
  }

 private:
  int v_;
  float* out_;
};

const qt::kernels::KernelFamily& misbehaving_family() {
  using namespace qt::kernels;
  static const KernelFamily f = [] {
    KernelFamily k;
    k.name = "test.misbehaving";
    k.dtypes = "f32";
    k.dims = {"n"};
    k.params = {{"v", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, ""}};
    k.plan = [](const Point&, const Shape&) {
      LaunchPlan p;
      p.buffers = {{"y", qt::kernels::DType::F32, 8, BufferSpec::Role::Output}};
      return p;
    };
    k.host_prepare = [](const Point& p, const Shape&, HostBuffers& b) -> std::unique_ptr<HostKernel> {
      if (p.at("v") == 4) throw PointRejected(PointRejected::Reason::CompileFailed, "ptxas: too many registers");
      return std::make_unique<MisbehavingKernel>(int(p.at("v")), b);
    };
    k.make_inputs = [](const Shape&, uint64_t) { return HostBuffers{}; };
    k.reference = [](const Shape&, const HostBuffers&) {
      Expected e;
      e.buffer = "y";
      e.values.assign(8, 1.0f);
      e.abs_tol = 1e-6;
      return std::vector<Expected>{e};
    };
    return k;
  }();
  return f;
}

}  // namespace

// The worker is a program of its own: it registers the scripted family before serving candidates.
QTUNE_TEST_WORKER(misbehaving, [](const std::string& req) {
  qt::kernels::add_family(&misbehaving_family());
  return handle_candidate_request(req);
});

TEST_CASE("a tuning run records crashes, hangs, wrong results and compile errors and still finds the best point",
          "[tuner][worker]") {
  qt::kernels::add_family(&misbehaving_family());
  auto fam = find_family("cpu.test.misbehaving");
  Worker worker(qt::test::test_worker("misbehaving"));
  TuneOptions opt;
  opt.strategy = "exhaustive";
  opt.budget = {};
  opt.timeout_s = 0.5;
  opt.measure.min_seconds = 0;
  opt.measure.racing = false;
  std::map<int, Status> seen;
  TuneReport rep = tune_shape(*fam, {1}, worker, opt, [&](const nlohmann::json& p, const CandidateOutcome& o) {
    seen[p.at("v").get<int>()] = o.status;
  });
  REQUIRE(rep.evaluations == 10);
  REQUIRE(seen.at(0) == Status::Crashed);
  REQUIRE(seen.at(1) == Status::Crashed);
  REQUIRE(seen.at(2) == Status::Timeout);
  REQUIRE(seen.at(3) == Status::WrongResult);
  REQUIRE(seen.at(4) == Status::CompileFailed);
  for (int v = 5; v <= 9; ++v) REQUIRE(seen.at(v) == Status::Ok);
  REQUIRE(rep.best_point);
  REQUIRE(rep.best_point->at("v") == 7);
  REQUIRE(rep.best_stats.median == Approx(1e-3));
  REQUIRE(rep.status_counts.at("crashed") == 2);
  REQUIRE(rep.status_counts.at("timeout") == 1);
  REQUIRE(worker.spawned() == 4);
  // The job is set up once per worker, outside the candidates' timeouts: the first worker and the three
  // that replaced a crash or a hang.
  REQUIRE(rep.setups == 4);
}

TEST_CASE("a worker is a fresh program: a library the tuner process loaded is not in the worker", "[tuner][worker]") {
  // What a forked copy would inherit and an exec'd program does not: here the CUDA toolkit's stub libcuda, the
  // very library whose inherited state broke every worker after the first on the H200.
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) QTUNE_SKIP("no CUDA toolkit stub library at " + stub);
  void* lib = dlopen(stub.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib);
  Worker w(qt::test::test_worker("scripted"));
  const WorkerReply r = w.call("mapped:stubs/libcuda.so", 10);
  dlclose(lib);
  REQUIRE(r.kind == WorkerReply::Ok);
  CHECK(r.payload == "not mapped");
}

TEST_CASE("a worker program that cannot be started is one error naming it, not a crashed candidate",
          "[tuner][worker]") {
  Worker w({"/nonexistent/qtune", "worker"});
  CHECK_THROWS_WITH(w.call("x", 5), Catch::Contains("cannot start the worker program /nonexistent/qtune"));
}

TEST_CASE("a worker that died while idle is replaced without blaming the next request", "[tuner][worker]") {
  Worker w(qt::test::test_worker("scripted"));
  REQUIRE(w.call("a", 5).kind == WorkerReply::Ok);
  pid_t first = w.pid();
  kill(first, SIGKILL);
  int status = 0;
  waitpid(first, &status, 0);  // make sure it is gone before the next call
  WorkerReply r = w.call("b", 5);
  REQUIRE(r.kind == WorkerReply::Ok);
  REQUIRE(r.payload == "echo:b");
  REQUIRE(w.pid() != first);
}
