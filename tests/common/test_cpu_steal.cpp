// The hypervisor's stolen time that qbench reports beside a decode's share of the bandwidth: read from the
// per-CPU lines of /proc/stat for the CPUs the process runs on, never from the machine-wide sum.
#include <catch2/catch.hpp>

#include <string>

#include "common/cpu_steal.h"
#include "common/error.h"
#include "tests/skip.h"

namespace {

// Counters as a 2-vCPU guest's /proc/stat gives them, with a third CPU the process is not allowed on.
const std::string kStat =
    "cpu  3000 0 600 9000 10 0 5 400 0 0\n"
    "cpu0 1000 0 200 3000 5 0 2 100 0 0\n"
    "cpu1 1500 0 300 3000 5 0 3 250 0 0\n"
    "cpu2 500 0 100 3000 0 0 0 50 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

}  // namespace

TEST_CASE("the CPU times sum the listed CPUs' lines, every state up to steal") {
  const qt::CpuTimes t = qt::parse_proc_stat(kStat, {0, 1});
  REQUIRE(t.known);
  CHECK(t.steal == 350);
  CHECK(t.total == (1000 + 200 + 3000 + 5 + 2 + 100) + (1500 + 300 + 3000 + 5 + 3 + 250));
  const qt::CpuTimes one = qt::parse_proc_stat(kStat, {2});
  CHECK(one.steal == 50);
  CHECK(one.total == 500 + 100 + 3000 + 50);
}

TEST_CASE("the stolen share is the steal ticks over all ticks between two readings") {
  const qt::CpuTimes before = qt::parse_proc_stat(kStat, {0, 1});
  const qt::CpuTimes after = qt::parse_proc_stat(
      "cpu0 1090 0 200 3000 5 0 2 110 0 0\n"
      "cpu1 1585 0 300 3000 5 0 3 265 0 0\n", {0, 1});
  // 200 ticks passed on the two CPUs, 25 of them stolen.
  CHECK(qt::steal_fraction(before, after) == Approx(25.0 / 200.0));
  CHECK(qt::steal_fraction(before, before) < 0);  // no tick passed
  CHECK(qt::steal_fraction(qt::CpuTimes{}, after) < 0);
}

TEST_CASE("a kernel without the steal counter, or CPUs that are not listed, give no figure") {
  CHECK_FALSE(qt::parse_proc_stat("cpu0 1000 0 200 3000 5 0 2\n", {0}).known);
  CHECK_FALSE(qt::parse_proc_stat(kStat, {7}).known);
}

TEST_CASE("a per-CPU line that is not a list of counters is an error that names the CPU") {
  CHECK_THROWS_WITH(qt::parse_proc_stat("cpu1 1000 0 x 3000 5 0 2 0\n", {1}),
                    Catch::Contains("cpu1") && Catch::Contains("not a list of counters"));
}

TEST_CASE("this process's CPUs have readable counters that only grow") {
  const qt::CpuTimes a = qt::read_cpu_times();
  if (!a.known) QTUNE_SKIP("/proc/stat has no steal counter for this process's CPUs");
  const qt::CpuTimes b = qt::read_cpu_times();
  CHECK(b.total >= a.total);
  CHECK(b.steal >= a.steal);
}
