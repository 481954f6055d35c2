#pragma once
// A linear family's reference sums computed on a device (kernels_src/reference/linear_sums.cuh) instead of
// the CPU: what lets a tuner verify a 4096 x 12288 x 4096 GEMM without minutes of CPU time. The result is
// the same definition as kernels::cpu_linear_sums (double sums of exact fp32 products, rounded once), and
// check_device_linear_sums() holds one device to it on a small shape before its sums are trusted.
#include <memory>
#include <string>

#include "device/api/device.h"
#include "kernels_src/registry/family.h"

namespace qt::plan {

// The reference kernel's module on `device`. A tuner's job setup loads it first: the context's first module
// load costs more than later ones, and belongs to no candidate.
std::shared_ptr<dev::Module> load_linear_sums_module(dev::Device& device);

// Throws qt::Error when the operands' sizes disagree, the device runs out of memory, or M, N or K exceed the
// kernel's 32-bit indexing.
kernels::LinearSums device_linear_sums(dev::Device& device, const kernels::LinearOperands& ops);

// The family's linear reference for `shape` on `device` and on the CPU, compared: "" when every sum agrees
// within the rounding of double additions in another order, else what differs.
std::string check_device_linear_sums(dev::Device& device, const kernels::KernelFamily& family,
                                     const kernels::Shape& shape);

}  // namespace qt::plan
