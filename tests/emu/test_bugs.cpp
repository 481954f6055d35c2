// Deliberately wrong kernels (tests/emu/kernels/buggy.cu): each bug is stopped with a qt::Error that names the
// kernel, the block, the thread, the address or shared offset, and the source line.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;
using Catch::Matchers::Contains;
using dev::Buffer;
using dev::KernelArgs;

namespace {

const std::vector<std::string> kKernels = {
    "k_missing_sync", "k_oob_write",   "k_divergent_barrier", "k_two_barriers", "k_misaligned_ldmatrix",
    "k_missing_wait", "k_shfl_exited", "k_mask_mismatch",     "k_misaligned_vector", "k_shared_oob",
    "k_warp_deadlock", "k_trap",       "k_syncwarp_ordered"};

std::shared_ptr<dev::Module> buggy() { return emu::test::module("buggy.cu", kKernels); }

// Runs the launch and returns the emulator's report (empty if it passed).
std::string report(const char* kernel, dev::LaunchConfig cfg, const KernelArgs& args) {
  try {
    emu::test::device().launch(buggy()->kernel(kernel), cfg, args);
  } catch (const qt::Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("a missing __syncthreads is reported as a shared-memory race with both threads and the line") {
  auto& dev = emu::test::device();
  Buffer x(dev, 64 * 4), out(dev, 64 * 4);
  dev.memset(x.ptr(), 0, 64 * 4);
  const std::string r = report("k_missing_sync", {{1}, {64}, 0}, KernelArgs().add(x.ptr()).add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_missing_sync") && Contains("block (0,0,0) thread (") &&
                    Contains("shared-memory race") && Contains("static shared offset") && (Contains("buggy.cu:9") || Contains("buggy.cu:10")));
  CHECK_THAT(r, Contains("wrote in the same barrier interval") || Contains("read in the same barrier interval"));
}

TEST_CASE("a race is found whatever the thread order") {
  auto& dev = emu::test::device();
  Buffer x(dev, 64 * 4), out(dev, 64 * 4);
  dev.memset(x.ptr(), 0, 64 * 4);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    emu::EmuDevice d(emu::test::test_options(seed));
    auto mod = emu::test::module("buggy.cu", kKernels, d);
    CHECK_THROWS_WITH(d.launch(mod->kernel("k_missing_sync"), {{1}, {64}, 0}, KernelArgs().add(x.ptr()).add(out.ptr())),
                      Contains("shared-memory race"));
  }
}

TEST_CASE("an out-of-bounds global write names the thread, the address and the allocation") {
  auto& dev = emu::test::device();
  const int n = 100;
  Buffer out(dev, n * 4);
  const std::string r = report("k_oob_write", {{1}, {128}, 0}, KernelArgs().add(out.ptr()).add(n));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_oob_write: block (0,0,0) thread (100,0,0)") &&
                    Contains("out-of-bounds global write of 4 byte(s)") &&
                    Contains("0 bytes past the end of allocation") && Contains("400 bytes") && Contains("buggy.cu:16"));
}

TEST_CASE("threads leaving before a barrier are reported as a divergent barrier") {
  auto& dev = emu::test::device();
  Buffer out(dev, 64 * 4);
  const std::string r = report("k_divergent_barrier", {{1}, {64}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_divergent_barrier") && Contains("__syncthreads") && Contains("buggy.cu:24") &&
                    (Contains("exited") && Contains("divergent barrier")));
}

TEST_CASE("different __syncthreads call sites are reported as a divergent barrier") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  const std::string r = report("k_two_barriers", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("divergent barrier") && (Contains("buggy.cu:33") || Contains("buggy.cu:36")));
}

TEST_CASE("a misaligned ldmatrix row address is reported with the lane and the address") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  const std::string r = report("k_misaligned_ldmatrix", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_misaligned_ldmatrix") && Contains("thread (0,0,0)") &&
                    Contains("ldmatrix: row address 8 (shared) given by lane 0 is not 16-byte aligned") &&
                    Contains("buggy.cu:47"));
}

TEST_CASE("reading cp.async data before cp_async_wait is reported") {
  auto& dev = emu::test::device();
  Buffer src(dev, 32 * 16), out(dev, 32 * 4);
  dev.memset(src.ptr(), 0, 32 * 16);
  const std::string r = report("k_missing_wait", {{1}, {32}, 0}, KernelArgs().add(src.ptr()).add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_missing_wait") && Contains("cp.async") && Contains("still pending") &&
                    Contains("buggy.cu:58"));
}

TEST_CASE("a shuffle naming lanes that already exited is reported") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  const std::string r = report("k_shfl_exited", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_shfl_exited") && Contains("__shfl_sync") &&
                    (Contains("exited without reaching") || Contains("already exited")));
}

TEST_CASE("lanes that disagree on a member mask are reported") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  const std::string r = report("k_mask_mismatch", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_mask_mismatch") && Contains("member mask") && Contains("buggy.cu:72"));
}

TEST_CASE("a misaligned vector load is reported with its address") {
  auto& dev = emu::test::device();
  Buffer x(dev, 200 * 4), out(dev, 32 * 4);
  dev.memset(x.ptr(), 0, 200 * 4);
  const std::string r = report("k_misaligned_vector", {{1}, {32}, 0}, KernelArgs().add(x.ptr()).add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_misaligned_vector") && Contains("misaligned 16-byte read at address 0x") &&
                    Contains("buggy.cu:78"));
}

TEST_CASE("a write past a static shared array is reported as out of bounds") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  const std::string r = report("k_shared_oob", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_shared_oob") && Contains("thread (31,0,0)") &&
                    Contains("out-of-bounds shared write of 4 byte(s) at shared offset 128") && Contains("buggy.cu:86"));
}

TEST_CASE("a deadlock between a warp collective and a barrier lists every wait site") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  const std::string r = report("k_warp_deadlock", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("kernel k_warp_deadlock") && Contains("deadlock") && Contains("16 thread(s) wait in __syncwarp at buggy.cu:94") &&
                    Contains("16 thread(s) wait in __syncthreads at buggy.cu:95"));
}

TEST_CASE("a device trap is reported with its message") {
  auto& dev = emu::test::device();
  Buffer out(dev, 64 * 4);
  const std::string r = report("k_trap", {{2}, {32}, 0}, KernelArgs().add(out.ptr()));
  INFO(r);
  CHECK_THAT(r, Contains("thread (3,0,0)") && Contains("trap: k_trap: invariant violated") && Contains("buggy.cu:101"));
}

TEST_CASE("a __syncwarp between a write and another lane's read is not a race") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  CHECK(report("k_syncwarp_ordered", {{1}, {32}, 0}, KernelArgs().add(out.ptr())).empty());
  const auto r = out.download<int>(32);
  for (int l = 0; l < 32; ++l) CHECK(r[l] == (31 - l) * 3);
}

TEST_CASE("the device keeps working after a failed launch") {
  auto& dev = emu::test::device();
  Buffer out(dev, 32 * 4);
  CHECK_FALSE(report("k_trap", {{1}, {32}, 0}, KernelArgs().add(out.ptr())).empty());
  CHECK(report("k_syncwarp_ordered", {{1}, {32}, 0}, KernelArgs().add(out.ptr())).empty());
}
