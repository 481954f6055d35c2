#pragma once
// How qbench --report times device work, one definition for the linear rows and the MoE rows, so that their
// figures compare: CUDA events around the queued work, the L2 flushed before each repetition (weights come
// from DRAM as they do in a model step), the median kept.
#include <functional>
#include <memory>
#include <string>

#include "device/api/device.h"
#include "device/blas/blas_lt.h"
#include "device/cuda/l2_flush.h"
#include "device/winners/winners.h"
#include "runtime/cli/report_measure.h"
#include "runtime/gpu/kernel_choice.h"

namespace qt::rt {

// The median of timed runs, repeated until both of `o`'s minimums (repetitions, total seconds) are met, and
// at most 2,000 times.
double median_of_runs(const KernelBenchOptions& o, const std::function<double()>& run_once);

// How a decode step runs a kernel, as a report times it: `launches` back to back, launch i on copy i % copies
// of its inputs, after the L2 is flushed. Either every launch has a copy of its own, or the copies together
// hold at least twice the device's L2 (at least 2 copies), so that no launch finds its operands in L2 as no
// kernel of a step does (the weights between two uses evict them), and no launch pays its fixed cost alone:
// the figure a kernel's bandwidth share is judged on.
struct Chain {
  int launches = 0;
  int64_t copies = 0;
  std::string detail() const;  // "32 launches back to back over 4 copies of the inputs, per launch"
};
// `bytes_per_copy`: what one launch reads (its operands); the emulator gets 2 launches over 2 copies.
Chain chain_for(const dev::Device& d, double bytes_per_copy);

// Times queued device work between two events. On a GPU: three warm-up runs, then repetitions until both
// minimums are met, each after the L2 is flushed; the median is kept. On the emulator one run: its time
// means nothing.
class DeviceTimer {
 public:
  DeviceTimer(dev::Device& d, const KernelBenchOptions& o);
  double time(const std::function<void()>& enqueue);
  // Seconds per launch of `chain`, `enqueue(copy)` queuing one launch on that copy of the inputs.
  double per_launch(const Chain& chain, const std::function<void(int64_t copy)>& enqueue);
  // The same for family `f`'s point `p` at `shape`: `chain.copies` plans of it, each with its own copy of `inputs`.
  double per_launch(const Chain& chain, const kernels::KernelFamily& f, const kernels::Point& p,
                    const kernels::Shape& shape, const kernels::HostBuffers& inputs);

 private:
  double once(const std::function<void()>& enqueue);
  dev::Device& device_;
  const KernelBenchOptions& options_;
  bool emu_;
  cuda::L2Flusher flusher_;
};

bool is_emulator(const dev::Device& d);

// What the report's device rows (linear and MoE) measure with: the kernel choices with the tuned store and
// without it, cuBLASLt or the reason there is none, and the timer.
struct DeviceBench {
  DeviceBench(dev::Device& device, const std::string& store_prefix, const KernelBenchOptions& options);
  winners::DeviceFingerprint fingerprint;
  std::shared_ptr<const winners::WinnersTable> table;  // null without --tuned-cache
  KernelChooser tuned, defaults;
  std::unique_ptr<blas::BlasLt> lt;  // null where cuBLASLt cannot run (the emulator, no GPU): no_blas says why
  std::string no_blas;
  DeviceTimer timer;
};

}  // namespace qt::rt
