#pragma once
// The result-store fingerprint of a GPU as the driver describes it: name, architecture, SM count, clocks,
// memory bus width, L2 size, driver, toolkit and NVRTC versions. The tuner (in its worker) and the runtime
// both take it from here, so winners written by one are found by the other.
#include "device/cuda/cuda_device.h"
#include "device/winners/fingerprint.h"

namespace qt::cuda {

winners::DeviceFingerprint cuda_fingerprint(const CudaDevice& device);

// "13.0" for 13000 (the driver's and the toolkit's version numbers).
std::string cuda_version_text(int version);

}  // namespace qt::cuda
