#pragma once
// Deliberately wrong kernels and what the emulator must report for each: the class of bug (substrings of the
// report) and the source line (one of several where the line depends on which thread trips first). The
// Hopper cases (tests/emu/kernels/hopper_buggy.cu) are listed here; test_seeds.cpp runs them, with the
// older ones, on every seed, and test_hopper_bugs.cpp once under the sanitizers.
#include <functional>
#include <string>
#include <vector>

#include "tests/emu/emu_test_util.h"

namespace qt::emu::test {

// Buffers every case may use: zeroed, big enough for all, except `exact` (400 bytes, for the bounds case).
struct Bufs {
  explicit Bufs(dev::Device& d) : a(d, 1 << 16), b(d, 1 << 16), c(d, 1 << 16), exact(d, 400) {
    for (dev::Buffer* x : {&a, &b, &c, &exact}) d.memset(x->ptr(), 0, x->bytes());
  }
  dev::Buffer a, b, c, exact;
};

struct BugCase {
  const char* file;
  const char* kernel;
  dev::LaunchConfig cfg;
  std::function<dev::KernelArgs(Bufs&)> args;
  std::vector<std::string> must;   // every one appears in the report
  std::vector<std::string> lines;  // one of them appears ("buggy.cu:9")
};

inline dev::KernelArgs one(Bufs& b) { return dev::KernelArgs().add(b.a.ptr()); }
inline dev::KernelArgs two(Bufs& b) { return dev::KernelArgs().add(b.a.ptr()).add(b.b.ptr()); }
// A kernel's input (b) and output (a), or its output and a selector.
inline dev::KernelArgs src_out(Bufs& b) { return dev::KernelArgs().add(b.b.ptr()).add(b.a.ptr()); }
inline std::function<dev::KernelArgs(Bufs&)> src_which(int which) {
  return [which](Bufs& b) { return dev::KernelArgs().add(b.b.ptr()).add(which); };
}
inline std::function<dev::KernelArgs(Bufs&)> out_which(int which) {
  return [which](Bufs& b) { return dev::KernelArgs().add(b.a.ptr()).add(which); };
}

inline const std::vector<std::string> kHopperBuggy = {
    "k_acc_read_in_flight",     "k_a_write_in_flight",       "k_overwrite_in_flight",
    "k_bulk_overwrite_in_flight", "k_missing_proxy_fence",   "k_bulk_read_before_wait",
    "k_wgmma_reads_unwaited_copy", "k_mbarrier_extra_arrival", "k_mbarrier_tx_overflow",
    "k_mbarrier_never_completes", "k_misaligned_bulk",       "k_bad_desc",
    "k_partial_warpgroup",      "k_warp_skips_wgmma",        "k_wgmma_without_fence",
    "k_exit_in_flight",         "k_named_barrier_count",     "k_mbarrier_unordered_init",
    "k_mbarrier_init_unfenced", "k_setmaxnreg_divergent",    "k_control",
    "k_named_barrier_no_wait",  "k_cp_async_refill_in_flight"};

// Compiled for sm_90a (QT_ARCH 90); modules hold no device state, so any device may launch them.
inline std::shared_ptr<dev::Module> hopper_buggy() { return module("hopper_buggy.cu", kHopperBuggy, sm90_device()); }

inline const std::vector<BugCase>& hopper_bug_cases() {
  const dev::LaunchConfig wg{{1}, {128}, 0};
  static const std::vector<BugCase> cases = {
      {"hopper_buggy.cu", "k_acc_read_in_flight", wg, one,
       {"reads the accumulator of a wgmma.mma_async still in flight (issued at hopper_buggy.cu:30)"},
       {"hopper_buggy.cu:47"}},
      {"hopper_buggy.cu", "k_a_write_in_flight", wg, src_out,
       {"writes the A fragment registers of a wgmma.mma_async still in flight"}, {"hopper_buggy.cu:57"}},
      {"hopper_buggy.cu", "k_overwrite_in_flight", wg, one,
       {"overwriting a stage still being read", "a wgmma.mma_async of warpgroup 0 (at hopper_buggy.cu:30) reads"},
       {"hopper_buggy.cu:68"}},
      {"hopper_buggy.cu", "k_bulk_overwrite_in_flight", wg, src_out,
       {"overwriting a stage still being read: the bulk copy (cp_async_bulk_g2s) of this thread writes 256 byte(s)"},
       {"hopper_buggy.cu:38"}},
      {"hopper_buggy.cu", "k_missing_proxy_fence", wg, one,
       {"wgmma.mma_async of warpgroup 0 reads B bytes", "at hopper_buggy.cu:91",
        "with no fence_proxy_async_shared()"},
       {"hopper_buggy.cu:30"}},
      {"hopper_buggy.cu", "k_bulk_read_before_wait", wg, src_out,
       {"reads 4 byte(s)", "that a bulk copy (cp_async_bulk_g2s) completing on the mbarrier at",
        "before the mbarrier phase it completes on was waited for"},
       {"hopper_buggy.cu:104"}},
      {"hopper_buggy.cu", "k_wgmma_reads_unwaited_copy", wg, src_out,
       {"wgmma.mma_async of warpgroup 0 reads B bytes", "a bulk copy (cp_async_bulk_g2s)",
        "before every thread of the warpgroup waited for the mbarrier phase"},
       {"hopper_buggy.cu:30"}},
      {"hopper_buggy.cu", "k_mbarrier_extra_arrival", wg, src_out,
       {"thread (32,0,0)", "already has all 1 expected arrival(s) and waits for 512 transaction byte(s)",
        "more arrivals than mbarrier_init's count"},
       {"hopper_buggy.cu:127"}},
      {"hopper_buggy.cu", "k_mbarrier_tx_overflow", wg, src_out,
       {"brought 256 byte(s) more than its mbarrier_arrive_expect_tx announced for phase 0"}, {"hopper_buggy.cu:138"}},
      {"hopper_buggy.cu", "k_mbarrier_never_completes", wg, src_out,
       {"deadlock", "128 thread(s) wait in mbarrier_try_wait_parity at hopper_buggy.cu:150",
        "waits in phase 0 for 0 of 1 arrival(s) and 512 transaction byte(s)"},
       {"hopper_buggy.cu:150"}},
      {"hopper_buggy.cu", "k_misaligned_bulk", wg, src_which(0), {"a size of 24 bytes (a positive multiple of 16)"},
       {"hopper_buggy.cu:161"}},
      {"hopper_buggy.cu", "k_misaligned_bulk", wg, src_which(1), {"is not 16-byte aligned", "shared destination"},
       {"hopper_buggy.cu:161"}},
      {"hopper_buggy.cu", "k_misaligned_bulk", wg, src_which(2), {"is not 16-byte aligned", "global source"},
       {"hopper_buggy.cu:161"}},
      {"hopper_buggy.cu", "k_bad_desc", wg, out_which(0), {"wgmma_desc: start address", "must be multiples of 16"},
       {"hopper_buggy.cu:173"}},
      {"hopper_buggy.cu", "k_bad_desc", wg, out_which(1),
       {"128B swizzle", "lies in row 1 of a 1024-byte swizzle pattern"}, {"hopper_buggy.cu:176"}},
      {"hopper_buggy.cu", "k_partial_warpgroup", {{1}, {96}, 0}, one,
       {"wgmma.mma_async in warpgroup 0, which has only 96 thread(s)"}, {"hopper_buggy.cu:191"}},
      {"hopper_buggy.cu", "k_warp_skips_wgmma", wg, one, {"wgmma.mma_async", "warpgroup", "exited"},
       {"hopper_buggy.cu:203"}},
      {"hopper_buggy.cu", "k_wgmma_without_fence", wg, one, {"wgmma.mma_async without a wgmma_fence()"},
       {"hopper_buggy.cu:213"}},
      {"hopper_buggy.cu", "k_exit_in_flight", wg, one,
       {"thread exited with 1 wgmma.mma_async operation(s) in flight (the first issued at hopper_buggy.cu:30)"},
       {"hopper_buggy.cu:30"}},
      {"hopper_buggy.cu", "k_named_barrier_count", wg, out_which(0), {"named_barrier_sync: a count of 48 threads"},
       {"hopper_buggy.cu:229"}},
      {"hopper_buggy.cu", "k_named_barrier_count", {{1}, {256}, 0}, out_which(1),
       {"named_barrier_sync: barrier 1 with a count of"}, {"hopper_buggy.cu:230"}},
      {"hopper_buggy.cu", "k_mbarrier_unordered_init", wg, one,
       {"mbarrier_arrive on shared address", "no mbarrier_init of it is ordered before this use"},
       {"hopper_buggy.cu:239"}},
      {"hopper_buggy.cu", "k_mbarrier_init_unfenced", wg, src_out, {"not visible to the async proxy"},
       {"hopper_buggy.cu:38"}},
      {"hopper_buggy.cu", "k_setmaxnreg_divergent", wg, one, {"setmaxnreg", "warpgroup", ".aligned"},
       {"hopper_buggy.cu:257", "hopper_buggy.cu:258"}},
      {"hopper_buggy.cu", "k_named_barrier_no_wait", wg, one, {"shared-memory race", "with nothing ordering the two"},
       {"hopper_buggy.cu:266", "hopper_buggy.cu:268"}},
      {"hopper_buggy.cu", "k_cp_async_refill_in_flight", wg, src_out,
       {"overwriting a stage still being read: cp.async of this thread writes 16 byte(s)",
        "a wgmma.mma_async of warpgroup 0 (at hopper_buggy.cu:30) reads"},
       {"hopper_buggy.cu:283"}},
  };
  return cases;
}

}  // namespace qt::emu::test
