#pragma once
// Runs one point of a kernel family on a device (emulator or GPU) for one problem shape and checks every
// output against the family's CPU reference. Used by the emulator tests and by the tuner's correctness gate.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"
#include "device/api/device.h"

namespace qt::compile {

struct VerifyResult {
  bool passed = false;
  std::string message;  // "" when passed; else which buffer, index, values
  double seconds = 0;   // wall time of the launches (emulator: the emulation)
};

// Loads (or reuses) the module with the point's kernels, fills the inputs from `seed`, launches the plan
// and compares. Workspaces start as 0xFF garbage on purpose: a kernel must not rely on zeroed memory.
// A kernel error the device detects (race, out-of-bounds, ...) propagates as qt::Error.
VerifyResult verify_point(dev::Device& device, const kernels::KernelFamily& family, const kernels::Point& point,
                          const kernels::ProblemShape& shape, uint64_t seed = 1);

// The same with caller-supplied inputs and expectations (e.g. golden data produced outside qtune). `module`,
// if given, must contain the point's kernels (sweeps load one module with every point's kernels once).
VerifyResult verify_point_with(dev::Device& device, const kernels::KernelFamily& family, const kernels::Point& point,
                               const kernels::ProblemShape& shape, const kernels::HostBuffers& inputs,
                               const std::vector<kernels::Expected>& expected,
                               std::shared_ptr<dev::Module> module = nullptr);

// One module holding the kernels of all `points` (each name expression once).
std::shared_ptr<dev::Module> load_family_module(dev::Device& device, const kernels::KernelFamily& family,
                                                const std::vector<kernels::Point>& points);

}  // namespace qt::compile
