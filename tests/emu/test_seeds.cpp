// Bug detection must not depend on the scheduling seed: every deliberately wrong kernel (tests/emu/kernels/
// buggy.cu, fidelity.cu, hopper_buggy.cu) is reported with its class and source line on each of 10 seeds,
// and correct kernels, including legal patterns the emulator once rejected or hung on, report nothing on any
// of them.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/emu/bug_cases.h"

using namespace qt;
using dev::Buffer;
using dev::KernelArgs;

namespace {

constexpr uint64_t kSeeds = 10;

const std::vector<std::string> kBuggy = {
    "k_missing_sync", "k_oob_write",   "k_divergent_barrier", "k_two_barriers", "k_misaligned_ldmatrix",
    "k_missing_wait", "k_shfl_exited", "k_mask_mismatch",     "k_misaligned_vector", "k_shared_oob",
    "k_warp_deadlock", "k_trap",       "k_syncwarp_ordered"};
const std::vector<std::string> kFidelity = {
    "k_halfwarp_shfl_then_syncwarp", "k_spin_wait",        "k_last_block_sum",        "k_splitk_partials",
    "k_splitk_reduce",               "k_reread_race",      "k_partial_syncwarps_race", "k_uninit_shared",
    "k_store_vs_atomic",             "k_global_store_vs_atomic", "k_global_counter",  "k_splitk_plain_add",
    "k_global_block_race",           "k_spin_forever"};

using emu::test::BugCase;
using emu::test::Bufs;
using emu::test::one;
using emu::test::two;

const std::vector<BugCase>& buggy_cases() {
  static const std::vector<BugCase> cases = {
      {"buggy.cu", "k_missing_sync", {{1}, {64}, 0}, two, {"shared-memory race"}, {"buggy.cu:9", "buggy.cu:10"}},
      {"buggy.cu", "k_oob_write", {{1}, {128}, 0}, [](Bufs& b) { return KernelArgs().add(b.exact.ptr()).add(100); },
       {"thread (100,0,0)", "out-of-bounds global write"}, {"buggy.cu:16"}},
      {"buggy.cu", "k_divergent_barrier", {{1}, {64}, 0}, one, {"divergent barrier"}, {"buggy.cu:24"}},
      {"buggy.cu", "k_two_barriers", {{1}, {32}, 0}, one, {"divergent barrier"}, {"buggy.cu:33", "buggy.cu:36"}},
      {"buggy.cu", "k_misaligned_ldmatrix", {{1}, {32}, 0}, one, {"is not 16-byte aligned"}, {"buggy.cu:47"}},
      {"buggy.cu", "k_missing_wait", {{1}, {32}, 0}, two, {"still pending"}, {"buggy.cu:58"}},
      {"buggy.cu", "k_shfl_exited", {{1}, {32}, 0}, one, {"__shfl_sync"}, {"buggy.cu:65"}},
      {"buggy.cu", "k_mask_mismatch", {{1}, {32}, 0}, one, {"disagree on the member mask"}, {"buggy.cu:72"}},
      {"buggy.cu", "k_misaligned_vector", {{1}, {32}, 0},
       [](Bufs& b) { return KernelArgs().add(b.a.ptr()).add(b.b.ptr()); }, {"misaligned 16-byte read"}, {"buggy.cu:78"}},
      {"buggy.cu", "k_shared_oob", {{1}, {32}, 0}, one, {"out-of-bounds shared write"}, {"buggy.cu:86"}},
      {"buggy.cu", "k_warp_deadlock", {{1}, {32}, 0}, one,
       {"deadlock", "wait in __syncwarp at buggy.cu:94", "wait in __syncthreads at buggy.cu:95"}, {"buggy.cu:94"}},
      {"buggy.cu", "k_trap", {{2}, {32}, 0}, one, {"thread (3,0,0)", "trap: k_trap"}, {"buggy.cu:101"}},
      {"fidelity.cu", "k_reread_race", {{1}, {32}, 0}, one, {"shared-memory race"}, {"fidelity.cu:78", "fidelity.cu:79"}},
      {"fidelity.cu", "k_partial_syncwarps_race", {{1}, {32}, 0}, one, {"shared-memory race"},
       {"fidelity.cu:88", "fidelity.cu:91"}},
      {"fidelity.cu", "k_uninit_shared", {{1}, {64}, 0}, one, {"read of uninitialised shared memory"}, {"fidelity.cu:100"}},
      {"fidelity.cu", "k_store_vs_atomic", {{1}, {64}, 0}, one, {"shared-memory race", "atomic"},
       {"fidelity.cu:109", "fidelity.cu:110"}},
      {"fidelity.cu", "k_global_store_vs_atomic", {{4}, {32}, 0}, one, {"global-memory race", "atomic"},
       {"fidelity.cu:117", "fidelity.cu:118"}},
      {"fidelity.cu", "k_global_counter", {{8}, {64}, 0}, one, {"global-memory race"}, {"fidelity.cu:122"}},
      {"fidelity.cu", "k_splitk_plain_add", {{8}, {32}, 0},
       [](Bufs& b) { return KernelArgs().add(b.a.ptr()).add(b.b.ptr()).add(16); },
       {"global-memory race", "blocks are not ordered within a launch"}, {"fidelity.cu:129"}},
      {"fidelity.cu", "k_global_block_race", {{1}, {64}, 0}, two, {"global-memory race", "same barrier interval"},
       {"fidelity.cu:135", "fidelity.cu:136"}},
      {"fidelity.cu", "k_spin_forever", {{1}, {64}, 0}, one,
       {"no progress (watchdog)", "1 thread(s) wait in a spin-wait (polling) at fidelity.cu:147",
        "63 thread(s) wait in __syncthreads at fidelity.cu:150"},
       {"fidelity.cu:147"}},
  };
  return cases;
}

// Modules hold no device state: one load serves the devices of every seed.
std::shared_ptr<dev::Module> module_of(const std::string& file) {
  if (file == "hopper_buggy.cu") return emu::test::hopper_buggy();
  return emu::test::module(file, file == "buggy.cu" ? kBuggy : kFidelity);
}

std::string report(emu::EmuDevice& dev, const std::string& file, const char* kernel, const dev::LaunchConfig& cfg,
                   const KernelArgs& args) {
  try {
    dev.launch(module_of(file)->kernel(kernel), cfg, args);
  } catch (const qt::Error& e) {
    return e.what();
  }
  return {};
}

// One device at a time: each holds fiber stacks for its host threads.
emu::EmuDevice& seeded(uint64_t seed) {
  static std::unique_ptr<emu::EmuDevice> dev;
  static uint64_t dev_seed = 0;
  if (!dev || dev_seed != seed) {
    dev.reset();
    emu::EmuOptions o = emu::test::test_options(seed);
    o.threads = 2;
    dev = std::make_unique<emu::EmuDevice>(o);
    dev_seed = seed;
  }
  return *dev;
}

}  // namespace

TEST_CASE("every deliberately wrong kernel is reported with its class and source line on each of 10 seeds") {
  std::vector<BugCase> cases = buggy_cases();
  for (const BugCase& c : emu::test::hopper_bug_cases()) cases.push_back(c);
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    for (const BugCase& c : cases) {
      emu::EmuDevice& dev = seeded(seed);
      Bufs bufs(dev);
      const std::string r = report(dev, c.file, c.kernel, c.cfg, c.args(bufs));
      INFO(c.kernel << " seed " << seed << ": " << r);
      CHECK_THAT(r, Catch::Matchers::Contains(std::string("kernel ") + c.kernel));
      for (const std::string& m : c.must) CHECK_THAT(r, Catch::Matchers::Contains(m));
      bool line = false;
      for (const std::string& l : c.lines) line = line || r.find(l) != std::string::npos;
      CHECK(line);
    }
  }
}

TEST_CASE("legal kernels report nothing and compute the right values on each of 10 seeds") {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    emu::EmuDevice& dev = seeded(seed);
    INFO("seed " << seed);
    {
      Bufs b(dev);
      CHECK(report(dev, "buggy.cu", "k_syncwarp_ordered", {{1}, {32}, 0}, one(b)).empty());
    }
    {
      Bufs b(dev);
      const std::vector<float> src(128, 2.0f);
      b.b.upload(src);
      CHECK(report(dev, "hopper_buggy.cu", "k_control", {{1}, {128}, 0}, emu::test::src_out(b)).empty());
      CHECK(b.a.download<float>(128) == src);
    }
    {
      Bufs b(dev);
      CHECK(report(dev, "fidelity.cu", "k_halfwarp_shfl_then_syncwarp", {{1}, {32}, 0}, one(b)).empty());
      const auto v = b.a.download<int>(32);
      for (int l = 0; l < 32; ++l) CHECK(v[l] == (l < 16 ? (l + 1) % 16 : l));
    }
    {
      Bufs b(dev);
      CHECK(report(dev, "fidelity.cu", "k_spin_wait", {{1}, {64}, 0}, one(b)).empty());
      const auto v = b.a.download<int>(64);
      for (int t = 0; t < 64; ++t) CHECK(v[t] == (t < 32 ? 1 : 2));
    }
    {
      Bufs b(dev);
      std::vector<float> x(8 * 32);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
      b.a.upload(x);
      const std::string r = report(dev, "fidelity.cu", "k_last_block_sum", {{8}, {64}, 0},
                                   KernelArgs().add(b.a.ptr()).add(b.b.ptr()).add(b.c.ptr()).add(b.c.ptr().offset(64)));
      INFO(r);
      CHECK(r.empty());
      float want = 0;
      for (float v : x) want += v;
      CHECK(b.c.download<float>(17)[16] == want);
    }
    {
      Bufs b(dev);
      std::vector<float> x(16 * 32, 1.0f);
      b.a.upload(x);
      CHECK(report(dev, "fidelity.cu", "k_splitk_partials", {{4}, {32}, 0},
                   KernelArgs().add(b.a.ptr()).add(b.b.ptr()).add(16)).empty());
      CHECK(report(dev, "fidelity.cu", "k_splitk_reduce", {{1}, {32}, 0},
                   KernelArgs().add(b.b.ptr()).add(b.c.ptr()).add(4)).empty());
      for (float v : b.c.download<float>(32)) CHECK(v == 16.0f);
    }
  }
}
