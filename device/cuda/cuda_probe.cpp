#include "device/cuda/cuda_probe.h"

#include <dlfcn.h>

namespace qt::tune {

CudaProbe probe_cuda() {
  CudaProbe p;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    p.reason = "no CUDA driver (libcuda.so.1 not found)";
    return p;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(dlsym(lib, "cuDeviceGetName"));
  if (!init || !count || !get || !name) {
    p.reason = "the CUDA driver lacks cuInit/cuDeviceGetCount";
  } else if (int rc = init(0); rc != 0) {
    p.reason = "cuInit failed with CUDA error " + std::to_string(rc) + " (no usable GPU)";
  } else if (count(&p.devices) != 0 || p.devices == 0) {
    p.reason = "the CUDA driver reports no GPU";
    p.devices = 0;
  } else {
    int dev = 0;
    char buf[256] = {0};
    if (get(&dev, 0) == 0 && name(buf, sizeof buf, dev) == 0) p.reason = buf;
    p.available = true;
  }
  // The handle stays open: unloading a CUDA driver after cuInit is unsafe.
  return p;
}

}  // namespace qt::tune
