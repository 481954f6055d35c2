#include "device/cuda/cuda_fingerprint.h"

#include <cuda.h>

#include "device/cuda/cuda_device.h"
#include "device/jit/nvrtc_compiler.h"

#ifndef QTUNE_VERSION
#define QTUNE_VERSION "0"
#endif

namespace qt::cuda {

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The GPU as its driver describes it: the tuner (in its worker) and the runtime both ask the device, so
// winners written by one are found by the other.
dev::DeviceFingerprint CudaDevice::store_fingerprint() const {
  dev::DeviceFingerprint d;
  d.name = name_;
  d.arch = "sm_" + std::to_string(arch_);
  d.sm_count = facts_.sm_count;
  d.memory_bytes = facts_.memory_bytes;
  d.clock_mhz = facts_.clock_mhz;
  d.mem_clock_mhz = facts_.mem_clock_mhz;
  d.bus_width_bits = facts_.bus_width_bits;
  d.l2_bytes = facts_.l2_bytes;
  d.driver = cuda_version_text(facts_.driver_version);
  d.cuda_version = cuda_version_text(CUDA_VERSION);
  d.nvrtc_version = compile::nvrtc_version();
  d.qtune_version = QTUNE_VERSION;
  return d;
}

}  // namespace qt::cuda
