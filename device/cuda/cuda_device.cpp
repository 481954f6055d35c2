#include "device/cuda/cuda_device.h"

#include <cstdio>
#include <vector>

#include "common/error.h"
#include "device/cuda/cuda_driver.h"
#include "device/jit/compile_service.h"

namespace qt::cuda {
namespace {

class CudaModule : public dev::Module {
 public:
  CudaModule(dev::ModuleSource src, CUmodule module, std::vector<CUfunction> functions)
      : src_(std::move(src)), module_(module), functions_(std::move(functions)) {}
  ~CudaModule() override {
    if (module_) driver().cuModuleUnload(module_);
  }
  dev::Kernel kernel(std::string_view name_expression) const override {
    for (size_t i = 0; i < src_.kernels.size(); ++i)
      if (src_.kernels[i] == name_expression) return dev::Kernel{this, i};
    throw Error("module " + src_.name + " has no kernel '" + std::string(name_expression) + "'", kExitFailure);
  }
  const dev::ModuleSource& source() const override { return src_; }
  CUfunction function(size_t i) const { return functions_.at(i); }

 private:
  dev::ModuleSource src_;
  CUmodule module_;
  std::vector<CUfunction> functions_;
};

}  // namespace

std::string cuda_unavailable_reason() {
  const DriverApi& d = driver();
  return d.available ? std::string() : d.unavailable_reason;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  const DriverApi& d = driver();
  if (!d.available) throw Error("cuda device unavailable: " + d.unavailable_reason, kExitUnavailable);
  int count = 0;
  d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    throw Error("cuda device " + std::to_string(ordinal) + " does not exist (" + std::to_string(count) + " GPUs)",
                kExitUnavailable);
  CUdevice dev;
  d.check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  device_ = dev;
  CUcontext ctx;
  d.check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  context_ = ctx;
  int major = 0, minor = 0;
  d.check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "compute capability");
  d.check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "compute capability");
  arch_ = major * 10 + minor;
  char buf[256] = {};
  d.check(d.cuDeviceGetName(buf, sizeof buf - 1, dev), "cuDeviceGetName");
  name_ = buf;
  CUuuid uuid{};
  d.check(d.cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid");
  std::string hex;
  for (char c : uuid.bytes) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(c));
    hex += b;
  }
  fingerprint_ = "cuda/sm" + std::to_string(arch_) + "/" + hex;
}

CudaDevice::~CudaDevice() {
  if (context_) driver().cuDevicePrimaryCtxRelease(device_);
}

void CudaDevice::make_current() const {
  driver().check(driver().cuCtxSetCurrent(static_cast<CUcontext>(context_)), "cuCtxSetCurrent");
}

dev::DevPtr CudaDevice::allocate(size_t bytes) {
  make_current();
  CUdeviceptr p = 0;
  driver().check(driver().cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc");
  return dev::DevPtr{p};
}

void CudaDevice::free(dev::DevPtr p) {
  if (!p) return;
  make_current();
  driver().cuMemFree(static_cast<CUdeviceptr>(p.addr));
}

void CudaDevice::copy_to_device(dev::DevPtr dst, const void* src, size_t bytes) {
  make_current();
  driver().check(driver().cuMemcpyHtoD(static_cast<CUdeviceptr>(dst.addr), src, bytes), "cuMemcpyHtoD");
}

void CudaDevice::copy_to_host(void* dst, dev::DevPtr src, size_t bytes) {
  make_current();
  driver().check(driver().cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src.addr), bytes), "cuMemcpyDtoH");
}

void CudaDevice::memset(dev::DevPtr dst, int byte, size_t bytes) {
  make_current();
  driver().check(driver().cuMemsetD8(static_cast<CUdeviceptr>(dst.addr), static_cast<unsigned char>(byte), bytes),
                 "cuMemsetD8");
}

std::shared_ptr<dev::Module> CudaDevice::load_module(const dev::ModuleSource& src) {
  compile::CompileRequest req;
  req.program_name = src.name;
  req.source = src.source;
  req.name_expressions = src.kernels;
  req.sm = arch_;
  for (const auto& [k, v] : src.defines) req.options.push_back("-D" + k + (v.empty() ? "" : "=" + v));
  for (const auto& dir : src.include_dirs) req.options.push_back("-I" + dir);
  req.options.insert(req.options.end(), src.cuda_options.begin(), src.cuda_options.end());
  static compile::CompileService service;
  const compile::CompileOutput out = service.compile_cached(req);

  make_current();
  CUmodule module = nullptr;
  driver().check(driver().cuModuleLoadData(&module, out.cubin.data()), ("cuModuleLoadData " + src.name).c_str());
  std::vector<CUfunction> functions;
  for (const auto& expr : src.kernels) {
    CUfunction f = nullptr;
    const std::string& lowered = out.lowered_names.at(expr);
    driver().check(driver().cuModuleGetFunction(&f, module, lowered.c_str()), ("cuModuleGetFunction " + expr).c_str());
    functions.push_back(f);
  }
  return std::make_shared<CudaModule>(src, module, std::move(functions));
}

void CudaDevice::launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, const dev::KernelArgs& args) {
  const auto* module = dynamic_cast<const CudaModule*>(kernel.module);
  if (!module) throw Error("cuda device: kernel does not belong to a cuda module", kExitFailure);
  const std::string& expr = module->source().kernels.at(kernel.index);
  dev::validate_launch(cfg, expr);
  make_current();
  CUfunction f = module->function(kernel.index);
  // Above 48 KiB a kernel must opt in to dynamic shared memory.
  if (cfg.dynamic_smem_bytes > 48 * 1024)
    driver().check(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                               static_cast<int>(cfg.dynamic_smem_bytes)),
                   ("cuFuncSetAttribute " + expr).c_str());
  std::vector<void*> params = args.pointers();
  driver().check(driver().cuLaunchKernel(f, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z,
                                         cfg.dynamic_smem_bytes, nullptr, params.empty() ? nullptr : params.data(),
                                         nullptr),
                 ("cuLaunchKernel " + expr).c_str());
}

void CudaDevice::synchronize() {
  make_current();
  driver().check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace qt::cuda
