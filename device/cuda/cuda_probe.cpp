#include "device/cuda/cuda_probe.h"

#include "device/cuda/cuda_driver.h"

namespace qt::tune {

CudaProbe probe_cuda() {
  // The driver loader is the one place libcuda is opened; the probe only reads what it found.
  const cuda::DriverApi& d = cuda::driver();
  CudaProbe p;
  if (!d.available) {
    p.reason = d.unavailable_reason;
    return p;
  }
  if (d.cuDeviceGetCount(&p.devices) != CUDA_SUCCESS || p.devices == 0) {
    p.reason = "the CUDA driver reports no GPU";
    p.devices = 0;
    return p;
  }
  CUdevice dev = 0;
  char buf[256] = {0};
  if (d.cuDeviceGet(&dev, 0) == CUDA_SUCCESS && d.cuDeviceGetName(buf, sizeof buf, dev) == CUDA_SUCCESS) p.reason = buf;
  p.available = true;
  return p;
}

}  // namespace qt::tune
