#pragma once
// The one way a family point runs: inputs uploaded, the plan's launches run on a Device (emulator or GPU) or
// its host kernel run on the CPU, outputs read back and compared with the family's CPU reference.
// Verification (tests, `qtune --device emu`) and the tuner's worker both use it.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/api/device.h"
#include "kernels_src/registry/family.h"

namespace qt::plan {

// One point prepared on one shape: buffers allocated and inputs in place, the module loaded. Outputs and
// workspaces are refilled with 0xFF garbage before each run, so a kernel that leaves an element unwritten or
// relies on zeroed memory fails verification. `device` may be null for host families.
class PlanRun {
 public:
  // Throws kernels::PointRejected when the point cannot run (constraint, compile error, resources).
  PlanRun(dev::Device* device, const kernels::KernelFamily& family, const kernels::Point& point,
          const kernels::Shape& shape, const kernels::HostBuffers& inputs, std::shared_ptr<dev::Module> module = nullptr);
  ~PlanRun();
  PlanRun(const PlanRun&) = delete;
  PlanRun& operator=(const PlanRun&) = delete;

  // Runs every launch (or the host kernel) once and waits; returns the seconds between device events recorded
  // before the first launch and after the last (on a GPU, CUDA events), or the host kernel's own measurement.
  double run();
  // Queues every launch once and returns at once, outputs not refilled: for timing between device events
  // (a kernel must be right on any prior contents, so repeating it is the same work). Device families only.
  void enqueue();
  // A buffer's device address, for work outside the plan that reads or writes it. Device families only.
  dev::DevPtr buffer(const std::string& name) const;
  std::vector<uint8_t> output(const std::string& buffer) const;
  const kernels::LaunchPlan& plan() const { return plan_; }

 private:
  void reset_outputs();
  dev::Device* device_;
  const kernels::KernelFamily& family_;
  kernels::LaunchPlan plan_;
  std::shared_ptr<dev::Module> module_;
  std::vector<std::pair<dev::Kernel, dev::LaunchConfig>> launches_;
  std::vector<dev::KernelArgs> args_;
  std::vector<std::pair<std::string, dev::Buffer>> buffers_;
  kernels::HostBuffers host_;
  kernels::HostBuffers inputs_;  // InOut buffers' initial contents
  std::unique_ptr<kernels::HostKernel> host_kernel_;
};

// A launch's arguments: buffers by name from `buffers`, run-time scalars from `scalars` in their declared
// types (null: the family's test values). Throws qt::Error naming what is not bound.
dev::KernelArgs launch_args(const kernels::KernelFamily& family, const kernels::Launch& launch,
                            const std::map<std::string, dev::DevPtr>& buffers,
                            const std::map<std::string, double>* scalars = nullptr);
dev::LaunchConfig launch_config(const kernels::Launch& launch);

struct VerifyResult {
  bool passed = false;
  std::string message;  // "" when passed; else which buffer, index, values
  double seconds = 0;   // of the run (emulator: the emulation)
};

// "" when every expected output matches, else the first mismatch with the point and shape.
std::string compare_outputs(const PlanRun& run, const kernels::KernelFamily& family, const kernels::Point& point,
                            const kernels::Shape& shape, const std::vector<kernels::Expected>& expected);

// Inputs from `seed`, one run, comparison with the family's reference. A kernel error the device detects
// (race, out-of-bounds, ...) propagates as qt::Error.
VerifyResult verify_point(dev::Device* device, const kernels::KernelFamily& family, const kernels::Point& point,
                          const kernels::Shape& shape, uint64_t seed = 1);

// The same with caller-supplied inputs and expectations (e.g. golden data produced outside qtune). `module`,
// if given, must contain the point's kernels (sweeps load one module with every point's kernels once).
VerifyResult verify_point_with(dev::Device* device, const kernels::KernelFamily& family, const kernels::Point& point,
                               const kernels::Shape& shape, const kernels::HostBuffers& inputs,
                               const std::vector<kernels::Expected>& expected,
                               std::shared_ptr<dev::Module> module = nullptr);

// One module holding the kernels of all `points` (each name expression once).
std::shared_ptr<dev::Module> load_family_module(dev::Device& device, const kernels::KernelFamily& family,
                                                const std::vector<kernels::Point>& points);

}  // namespace qt::plan
