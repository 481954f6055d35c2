// Thread block clusters on the emulator (device/emu/cluster.h): the CTAs of a cluster read each other's shared
// memory after a barrier.cluster and get the values the other wrote, on every scheduling seed; each way of
// breaking a cluster's rules (tests/emu/kernels/cluster.cu) is reported with its class and line on every seed;
// barrier.cluster waits only for threads that have not exited, and a CTA spinning on another's flag lets it run,
// as on a GPU; a launch whose cluster cannot tile the grid is refused before it runs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;

namespace {

const std::vector<std::string> kKernels = {"k_exchange",         "k_read_before_sync", "k_exit_while_read",
                                           "k_divergent_sync",   "k_exit_before_sync", "k_mapa_bad_rank",
                                           "k_remote_out_of_bounds", "k_fill_alone", "k_flag_across_ctas"};

// Clusters of two CTAs of 64 threads along x.
dev::LaunchConfig pairs(uint32_t blocks) { return dev::LaunchConfig({blocks}, {64}, 0, {2}); }

struct Misuse {
  const char* kernel;
  std::vector<std::string> any_of;  // the report holds one of these
  std::vector<std::string> lines;   // and one of these lines
};

}  // namespace

TEST_CASE("a cluster's CTAs read each other's shared memory after barrier.cluster, on each of 10 seeds") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    emu::EmuDevice dev(emu::test::test_options(seed, 90));
    auto m = emu::test::module("cluster.cu", kKernels, dev);
    dev::Buffer out(dev, 1024 * 4);
    dev.memset(out.ptr(), 0, out.bytes());
    // Four CTAs: two clusters, each CTA reading its neighbour's floats rank * 1000 + t.
    REQUIRE_NOTHROW(dev.launch(m->kernel("k_exchange"), pairs(4), dev::KernelArgs().add(out.ptr())));
    const std::vector<float> got = out.download<float>(1024);
    for (uint32_t b = 0; b < 4; ++b) {
      const uint32_t rank = b % 2, other = rank ^ 1;
      INFO("seed " << seed << " block " << b);
      CHECK(got[512 + b] == static_cast<float>(rank));
      CHECK(got[520 + b] == 2.0f);
      for (uint32_t t = 0; t < 64; ++t) {
        const uint32_t k = t % 16;
        CHECK(got[64 * b + t] == static_cast<float>(4000 * other + 16 * k + 6));
      }
    }
  }
}

TEST_CASE("barrier.cluster waits for the threads that have not exited, and a spinning CTA lets the others run") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    emu::EmuDevice dev(emu::test::test_options(seed, 90));
    auto m = emu::test::module("cluster.cu", kKernels, dev);
    dev::Buffer out(dev, 1024 * 4), flag(dev, 4);
    dev.memset(out.ptr(), 0, out.bytes());
    dev.memset(flag.ptr(), 0, flag.bytes());
    INFO("seed " << seed);
    // Rank 1 returns at once; rank 0's barrier.cluster completes without it (PTX: non-exited threads).
    REQUIRE_NOTHROW(dev.launch(m->kernel("k_exit_before_sync"), pairs(2), dev::KernelArgs().add(out.ptr())));
    CHECK(out.download<float>(64) == std::vector<float>(64, 1.0f));
    // Rank 0 spins on a global flag rank 1 sets: the emulator must turn to rank 1, not wait for the watchdog.
    REQUIRE_NOTHROW(dev.launch(m->kernel("k_flag_across_ctas"), pairs(2),
                               dev::KernelArgs().add(out.ptr()).add(flag.ptr())));
    // A block without clusters on the Worker that just ran a cluster: the other CTA's reads of these bytes
    // belong to the cluster that is gone and race with nothing.
    REQUIRE_NOTHROW(dev.launch(m->kernel("k_exchange"), pairs(2), dev::KernelArgs().add(out.ptr())));
    REQUIRE_NOTHROW(dev.launch(m->kernel("k_fill_alone"), dev::LaunchConfig({1}, {64}, 0),
                               dev::KernelArgs().add(out.ptr())));
    CHECK(out.download<float>(1)[0] == 63.0f);
  }
}

TEST_CASE("each misuse of a cluster is reported with its class and line on each of 10 seeds") {
  const std::vector<Misuse> cases = {
      {"k_read_before_sync", {"distributed shared-memory race", "(through distributed shared memory)"},
       {"cluster.cu:7", "cluster.cu:12"}},
      {"k_exit_while_read",
       {"exited while thread", "which has exited: a barrier.cluster before its exit is missing"}, {"cluster.cu:12"}},
      {"k_divergent_sync", {"divergent barrier.cluster"}, {"cluster.cu:48", "cluster.cu:50"}},
      {"k_mapa_bad_rank", {"mapa to CTA rank 2 of a cluster of 2 CTA(s)"}, {"cluster.cu:67"}},
      {"k_remote_out_of_bounds", {"out-of-bounds ld.shared::cluster of 16 byte(s) at static shared offset 256"},
       {"cluster.cu:78"}},
  };
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    emu::EmuDevice dev(emu::test::test_options(seed, 90));
    auto m = emu::test::module("cluster.cu", kKernels, dev);
    dev::Buffer out(dev, 1024 * 4);
    for (const Misuse& c : cases) {
      std::string r;
      try {
        dev.launch(m->kernel(c.kernel), pairs(2), dev::KernelArgs().add(out.ptr()));
      } catch (const qt::Error& e) {
        r = e.what();
      }
      INFO("seed " << seed << " " << c.kernel << ": " << r);
      CHECK_THAT(r, Catch::Matchers::Contains(std::string("emu: kernel ") + c.kernel));
      bool what = false, line = false;
      for (const std::string& s : c.any_of) what = what || r.find(s) != std::string::npos;
      for (const std::string& l : c.lines) line = line || r.find(l) != std::string::npos;
      CHECK(what);
      CHECK(line);
    }
    // A correct cluster kernel after all that reports nothing.
    CHECK_NOTHROW(dev.launch(m->kernel("k_exchange"), pairs(2), dev::KernelArgs().add(out.ptr())));
  }
}

TEST_CASE("a launch whose cluster does not tile the grid or exceeds 8 CTAs is refused, naming both") {
  auto& dev = emu::test::sm90_device();
  auto m = emu::test::module("cluster.cu", kKernels, dev);
  dev::Buffer out(dev, 1024 * 4);
  CHECK_THROWS_WITH(dev.launch(m->kernel("k_exchange"), dev::LaunchConfig({3}, {64}, 0, {2}),
                               dev::KernelArgs().add(out.ptr())),
                    Catch::Contains("cluster (2,1,1) does not divide the grid (3,1,1)"));
  CHECK_THROWS_WITH(dev.launch(m->kernel("k_exchange"), dev::LaunchConfig({16}, {64}, 0, {16}),
                               dev::KernelArgs().add(out.ptr())),
                    Catch::Contains("a cluster holds 1 to 8 CTAs"));
}
