#include "device/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

#include "common/error.h"

namespace qt::cuda {
namespace {

const char* result_name(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    default: return "CUresult";
  }
}

}  // namespace

void DriverApi::check(CUresult r, const std::string& what) const {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  const std::string code = name ? std::string(name) : "CUresult " + std::to_string(int(r));
  throw Error(what + ": " + code + " (" + (text ? text : "no description") + ")", kExitFailure);
}

namespace {

enum class Namespace { Main, Isolated };

DriverApi load(const std::string& library, Namespace ns) {
  DriverApi api;
  // A library inspected by path (a test of the toolkit's stub, a diagnostic) gets a link-map namespace of its
  // own. The stub's soname is libcuda.so.1: loaded into the main namespace it would be what every later
  // dlopen("libcuda.so.1") returns, and the real driver would never load in this process.
  void* lib = ns == Namespace::Isolated ? dlmopen(LM_ID_NEWLM, library.c_str(), RTLD_NOW | RTLD_LOCAL)
                                        : dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    api.unavailable_reason = "no CUDA driver: cannot load " + library + " (" + (err ? err : "dlopen failed") + ")";
    return api;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  api.cuInit = reinterpret_cast<decltype(api.cuInit)>(dlsym(lib, "cuInit"));
  if (!get_proc || !api.cuInit) {
    api.unavailable_reason = library + " lacks cuInit/cuGetProcAddress_v2: driver older than CUDA 12";
    return api;
  }
  const CUresult init = api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    api.unavailable_reason =
        init == CUDA_ERROR_STUB_LIBRARY
            ? library + " is the toolkit's stub library, not a driver (cuInit: CUDA_ERROR_STUB_LIBRARY)"
            : "cuInit failed with " + std::string(result_name(init)) + " (" + std::to_string(int(init)) + ")";
    return api;
  }
  std::string missing;
  // An optional entry point stays null where the driver lacks it; a required one missing makes the driver unusable.
  auto resolve = [&](const char* name, auto& fn, bool required = true) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status{};
    if ((get_proc(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p) && required)
      missing += std::string(missing.empty() ? "" : ", ") + name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  resolve("cuDriverGetVersion", api.cuDriverGetVersion);
  resolve("cuGetErrorName", api.cuGetErrorName);
  resolve("cuGetErrorString", api.cuGetErrorString);
  resolve("cuDeviceGetCount", api.cuDeviceGetCount);
  resolve("cuDeviceGet", api.cuDeviceGet);
  resolve("cuDeviceGetName", api.cuDeviceGetName);
  resolve("cuDeviceGetAttribute", api.cuDeviceGetAttribute);
  resolve("cuDeviceGetUuid", api.cuDeviceGetUuid);
  resolve("cuDeviceTotalMem", api.cuDeviceTotalMem);
  resolve("cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain);
  resolve("cuDevicePrimaryCtxRelease", api.cuDevicePrimaryCtxRelease);
  resolve("cuCtxSetCurrent", api.cuCtxSetCurrent);
  resolve("cuStreamCreate", api.cuStreamCreate);
  resolve("cuStreamDestroy", api.cuStreamDestroy);
  resolve("cuStreamSynchronize", api.cuStreamSynchronize);
  resolve("cuMemAlloc", api.cuMemAlloc);
  resolve("cuMemFree", api.cuMemFree);
  resolve("cuMemcpyHtoDAsync", api.cuMemcpyHtoDAsync);
  resolve("cuMemcpyDtoHAsync", api.cuMemcpyDtoHAsync);
  resolve("cuMemsetD8Async", api.cuMemsetD8Async);
  resolve("cuModuleLoadData", api.cuModuleLoadData);
  resolve("cuModuleUnload", api.cuModuleUnload);
  resolve("cuModuleGetFunction", api.cuModuleGetFunction);
  resolve("cuFuncSetAttribute", api.cuFuncSetAttribute);
  resolve("cuLaunchKernel", api.cuLaunchKernel);
  resolve("cuEventCreate", api.cuEventCreate);
  resolve("cuEventDestroy", api.cuEventDestroy);
  resolve("cuEventRecord", api.cuEventRecord);
  resolve("cuEventSynchronize", api.cuEventSynchronize);
  resolve("cuEventElapsedTime", api.cuEventElapsedTime);
  resolve("cuStreamBeginCapture", api.cuStreamBeginCapture);
  resolve("cuStreamEndCapture", api.cuStreamEndCapture);
  resolve("cuGraphInstantiateWithFlags", api.cuGraphInstantiateWithFlags);
  resolve("cuGraphLaunch", api.cuGraphLaunch);
  resolve("cuGraphExecDestroy", api.cuGraphExecDestroy);
  resolve("cuGraphDestroy", api.cuGraphDestroy);
  resolve("cuLaunchKernelEx", api.cuLaunchKernelEx, /*required=*/false);
  if (!missing.empty()) {
    api.unavailable_reason = library + " does not provide " + missing;
    return api;
  }
  api.cuDriverGetVersion(&api.driver_version);
  int count = 0;
  if (api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    api.unavailable_reason = "the CUDA driver reports no GPU";
    return api;
  }
  api.available = true;
  return api;  // the library stays loaded for the life of the process
}

}  // namespace

DriverApi load_driver(const std::string& library) { return load(library, Namespace::Isolated); }

const DriverApi& driver() {
  static const DriverApi api = [] {
    const char* override_path = std::getenv("QTUNE_LIBCUDA");
    return load(override_path && *override_path ? override_path : "libcuda.so.1", Namespace::Main);
  }();
  return api;
}

}  // namespace qt::cuda
