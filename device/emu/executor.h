#pragma once
// The SIMT executor: runs one kernel launch on the CPU. Every CUDA thread is a fiber; the fibers of a block
// run on one host thread in a seeded random order between synchronisation points; blocks are spread over
// several host threads. The checks of kernels_src/common/README.md ("What the emulator checks") are made
// by its parts: block_scheduler (barriers, warp collectives, deadlocks), memory_checks (bounds, alignment,
// races), device_api (what kernels call) and bug_reports (how a bug is reported).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels_src/common/emu_abi.h"
#include "device/api/device.h"
#include "device/emu/profile_counters.h"

namespace qt::emu {

using KernelEntry = void (*)(void** args);

struct ExecOptions {
  uint32_t threads = 0;  // host threads running blocks; 0 = hardware concurrency (at most 8)
  uint64_t seed = 1;     // scheduling seed (same seed, same interleaving per block)
  bool race_checks = true;
  // A block that spins without progress this long ends with a report of its waiting threads (0: never);
  // spinning on shared memory with no writer left is reported at once.
  double watchdog_seconds = 60;
  bool profile = false;  // observe memory instructions per warp (profile.h)
  uint64_t memory_bytes = 0;  // the emulator's memory (EmuOptions::memory_bytes); 0 = the host's
};

struct LaunchRequest {
  KernelEntry entry = nullptr;
  void** args = nullptr;
  dev::LaunchConfig cfg;
  std::string kernel_name;
};

struct ExecStats {
  uint64_t fiber_switches = 0;
  uint64_t threads_run = 0;
  uint64_t blocks_run = 0;
};

class Executor {
 public:
  explicit Executor(ExecOptions opts);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs the launch to completion; throws qt::Error describing the first detected bug.
  void run(const LaunchRequest& req);
  const Api* api() const;
  const ExecOptions& options() const { return opts_; }
  ExecStats stats() const;  // totals since construction
  // With ExecOptions::profile: the memory-instruction profile of each kernel launched since construction or
  // the last clear_profiles (profile.h).
  std::vector<KernelProfile> profiles() const;
  void clear_profiles();

 private:
  struct Impl;
  ExecOptions opts_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qt::emu
