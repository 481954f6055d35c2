#include "device/cuda/cuda_fingerprint.h"

#include <cuda.h>

#include "device/jit/nvrtc_compiler.h"

namespace qt::cuda {

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

winners::DeviceFingerprint cuda_fingerprint(const CudaDevice& device) {
  winners::DeviceFingerprint d = winners::gpu_fingerprint(device.name(), device.arch());
  const CudaFacts& f = device.facts();
  d.sm_count = f.sm_count;
  d.memory_bytes = f.memory_bytes;
  d.clock_mhz = f.clock_mhz;
  d.mem_clock_mhz = f.mem_clock_mhz;
  d.bus_width_bits = f.bus_width_bits;
  d.l2_bytes = f.l2_bytes;
  d.driver = cuda_version_text(f.driver_version);
  d.cuda_version = cuda_version_text(CUDA_VERSION);
  d.nvrtc_version = compile::nvrtc_version();
  return d;
}

}  // namespace qt::cuda
