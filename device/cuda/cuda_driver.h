#pragma once
// The CUDA driver API, loaded lazily: libcuda.so.1 is dlopen'ed on first use, never linked, so every qtune
// binary starts on machines without a GPU. cuInit is resolved with dlsym; everything else through
// cuGetProcAddress_v2 (ABI-versioned). "No driver", "stub library" (the toolkit's lib64/stubs/libcuda.so,
// cuInit = CUDA_ERROR_STUB_LIBRARY) and "no device" all make the driver unavailable with a reason.
#include <cuda.h>

#include <string>

namespace qt::cuda {

struct DriverApi {
  bool available = false;
  std::string unavailable_reason;  // one line, set when !available
  int driver_version = 0;          // cuDriverGetVersion, e.g. 13000

  // Each pointer has the ABI of CUDA 12.0 (cuGetProcAddress is asked for version 12000 under the plain name,
  // so "cuStreamBeginCapture" gives cuStreamBeginCapture_v2 with its capture mode, "cuMemAlloc" gives
  // cuMemAlloc_v2 with size_t). CU_GET_PROC_ADDRESS_DEFAULT gives the legacy-default-stream flavour of the
  // stream functions, which makes no difference here: every call names the device's own stream.
  CUresult (*cuInit)(unsigned int) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*cuDeviceGetUuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned int) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  // Optional (null where the driver lacks it, CUDA < 12.0): launches with attributes, programmatic dependent
  // launch among them (CudaDevice::set_programmatic_launch).
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned int) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;

  // Throws qt::Error (exit code 1) "<what>: CUDA_ERROR_NAME (driver's description)" unless r == CUDA_SUCCESS.
  void check(CUresult r, const std::string& what) const;
};

// Loaded once, thread-safe. The library path is $QTUNE_LIBCUDA if set (tests point it at the stub or at a
// missing file), else libcuda.so.1 from the loader's search path.
const DriverApi& driver();

// Loads a driver from an explicit path, uncached, in a link-map namespace of its own (for tests and
// diagnostics): whatever it loads cannot become the library driver() later finds as libcuda.so.1.
DriverApi load_driver(const std::string& library);

}  // namespace qt::cuda
