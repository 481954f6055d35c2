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
  CudaModule(dev::ModuleSource src, CUcontext context, CUmodule module, std::vector<CUfunction> functions)
      : src_(std::move(src)), context_(context), module_(module), functions_(std::move(functions)) {}
  ~CudaModule() override {
    // cuModuleUnload acts on the calling thread's current context.
    driver().cuCtxSetCurrent(context_);
    driver().cuModuleUnload(module_);
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
  CUcontext context_;
  CUmodule module_;
  std::vector<CUfunction> functions_;
};

struct CudaEvent : dev::Event {
  CudaEvent(const CudaDevice* owner_, CUcontext context_, CUevent event_)
      : owner(owner_), context(context_), event(event_) {}
  ~CudaEvent() override {
    driver().cuCtxSetCurrent(context);
    driver().cuEventDestroy(event);
  }
  const CudaDevice* const owner;
  const CUcontext context;
  const CUevent event;
};

CUstream as_stream(void* s) { return static_cast<CUstream>(s); }
CUdeviceptr as_ptr(dev::DevPtr p) { return static_cast<CUdeviceptr>(p.addr); }

}  // namespace

// An instantiated CUDA graph; launched on its device's stream.
class CudaGraph : public dev::Graph {
 public:
  CudaGraph(CudaDevice& device, CUgraphExec exec) : device_(device), exec_(exec) {}
  ~CudaGraph() override {
    driver().cuCtxSetCurrent(static_cast<CUcontext>(device_.context_));
    driver().cuGraphExecDestroy(exec_);
  }
  void replay() override {
    device_.refuse_in_capture("Graph::replay()");
    device_.make_current();
    driver().check(driver().cuGraphLaunch(exec_, as_stream(device_.stream_)), "cuGraphLaunch");
  }

 private:
  CudaDevice& device_;
  CUgraphExec exec_;
};

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
  int major = 0, minor = 0;
  d.check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "compute capability");
  d.check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "compute capability");
  arch_ = major * 10 + minor;
  char buf[256] = {};
  d.check(d.cuDeviceGetName(buf, sizeof buf - 1, dev), "cuDeviceGetName");
  name_ = buf;
  auto attribute = [&](CUdevice_attribute a, const char* what) {
    int v = 0;
    d.check(d.cuDeviceGetAttribute(&v, a, dev), what);
    return v;
  };
  facts_.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  facts_.clock_mhz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate") / 1000;
  facts_.mem_clock_mhz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock rate") / 1000;
  facts_.bus_width_bits = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "memory bus width");
  facts_.l2_bytes = uint64_t(attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size"));
  size_t total = 0;
  d.check(d.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
  facts_.memory_bytes = total;
  facts_.driver_version = d.driver_version;

  CUcontext ctx;
  d.check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  context_ = ctx;
  CUstream stream = nullptr;
  const CUresult r = d.cuCtxSetCurrent(ctx);
  const CUresult s = r == CUDA_SUCCESS ? d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) : r;
  if (s != CUDA_SUCCESS) {
    d.cuDevicePrimaryCtxRelease(dev);  // the destructor does not run for a constructor that throws
    d.check(s, r != CUDA_SUCCESS ? "cuCtxSetCurrent" : "cuStreamCreate");
  }
  stream_ = stream;
}

CudaDevice::~CudaDevice() {
  const DriverApi& d = driver();
  d.cuCtxSetCurrent(static_cast<CUcontext>(context_));
  if (capturing_) {
    CUgraph graph = nullptr;
    if (d.cuStreamEndCapture(as_stream(stream_), &graph) == CUDA_SUCCESS && graph) d.cuGraphDestroy(graph);
  }
  d.cuStreamSynchronize(as_stream(stream_));
  d.cuStreamDestroy(as_stream(stream_));
  d.cuDevicePrimaryCtxRelease(device_);
}

void CudaDevice::make_current() const {
  driver().check(driver().cuCtxSetCurrent(static_cast<CUcontext>(context_)), "cuCtxSetCurrent");
}

void CudaDevice::refuse_in_capture(const char* call) const {
  if (capturing_)
    throw Error(std::string("cuda: ") + call +
                    " is not allowed during graph capture (between begin_capture() and end_capture())",
                kExitFailure);
}

dev::DevPtr CudaDevice::allocate(size_t bytes) {
  refuse_in_capture("allocate()");
  make_current();
  CUdeviceptr p = 0;
  driver().check(driver().cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc of " + std::to_string(bytes) + " bytes");
  return dev::DevPtr{p};
}

void CudaDevice::free(dev::DevPtr p) {
  if (!p) return;
  refuse_in_capture("free()");
  make_current();
  // Work queued on the stream may still use the memory. Errors are dropped: free runs in destructors.
  driver().cuStreamSynchronize(as_stream(stream_));
  driver().cuMemFree(as_ptr(p));
}

void CudaDevice::copy_to_device(dev::DevPtr dst, const void* src, size_t bytes) {
  refuse_in_capture("copy_to_device()");
  if (bytes == 0) return;
  make_current();
  driver().check(driver().cuMemcpyHtoDAsync(as_ptr(dst), src, bytes, as_stream(stream_)),
                 "cuMemcpyHtoDAsync of " + std::to_string(bytes) + " bytes");
}

void CudaDevice::copy_to_host(void* dst, dev::DevPtr src, size_t bytes) {
  refuse_in_capture("copy_to_host()");
  if (bytes == 0) return;
  make_current();
  driver().check(driver().cuMemcpyDtoHAsync(dst, as_ptr(src), bytes, as_stream(stream_)),
                 "cuMemcpyDtoHAsync of " + std::to_string(bytes) + " bytes");
  driver().check(driver().cuStreamSynchronize(as_stream(stream_)), "cuStreamSynchronize after a copy to host");
}

void CudaDevice::memset(dev::DevPtr dst, int byte, size_t bytes) {
  if (bytes == 0) return;
  make_current();
  driver().check(
      driver().cuMemsetD8Async(as_ptr(dst), static_cast<unsigned char>(byte), bytes, as_stream(stream_)),
      "cuMemsetD8Async of " + std::to_string(bytes) + " bytes");
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
  driver().check(driver().cuModuleLoadData(&module, out.cubin.data()), "cuModuleLoadData " + src.name);
  std::vector<CUfunction> functions;
  for (const auto& expr : src.kernels) {
    CUfunction f = nullptr;
    const std::string& lowered = out.lowered_names.at(expr);
    const CUresult r = driver().cuModuleGetFunction(&f, module, lowered.c_str());
    if (r != CUDA_SUCCESS) driver().cuModuleUnload(module);
    driver().check(r, "cuModuleGetFunction " + expr);
    functions.push_back(f);
  }
  return std::make_shared<CudaModule>(src, static_cast<CUcontext>(context_), module, std::move(functions));
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
                   "cuFuncSetAttribute " + expr + " dynamic shared memory " +
                       std::to_string(cfg.dynamic_smem_bytes) + " bytes");
  std::vector<void*> params = args.pointers();
  const bool clustered = cfg.cluster.count() > 1;
  if (clustered && (arch_ < 90 || !driver().cuLaunchKernelEx))
    throw Error("launch of " + expr + ": thread block clusters need sm_90 and a driver with cuLaunchKernelEx; this GPU is sm_" +
                    std::to_string(arch_),
                kExitFailure);
  if (programmatic_ || clustered) {
    CUlaunchAttribute attrs[2]{};
    unsigned n = 0;
    if (programmatic_) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (clustered) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = cfg.cluster.x, attrs[n].value.clusterDim.y = cfg.cluster.y;
      attrs[n++].value.clusterDim.z = cfg.cluster.z;
    }
    CUlaunchConfig lc{};
    lc.gridDimX = cfg.grid.x, lc.gridDimY = cfg.grid.y, lc.gridDimZ = cfg.grid.z;
    lc.blockDimX = cfg.block.x, lc.blockDimY = cfg.block.y, lc.blockDimZ = cfg.block.z;
    lc.sharedMemBytes = static_cast<unsigned>(cfg.dynamic_smem_bytes);
    lc.hStream = as_stream(stream_);
    lc.attrs = attrs;
    lc.numAttrs = n;
    driver().check(driver().cuLaunchKernelEx(&lc, f, params.empty() ? nullptr : params.data(), nullptr),
                   std::string("cuLaunchKernelEx (") + (programmatic_ ? "programmatic dependent launch" : "") +
                       (programmatic_ && clustered ? ", " : "") + (clustered ? "cluster " + dev::to_string(cfg.cluster) : "") +
                       ") " + expr + " grid " + dev::to_string(cfg.grid) + " block " + dev::to_string(cfg.block));
    return;
  }
  driver().check(driver().cuLaunchKernel(f, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z,
                                         cfg.dynamic_smem_bytes, as_stream(stream_),
                                         params.empty() ? nullptr : params.data(), nullptr),
                 "cuLaunchKernel " + expr + " grid " + dev::to_string(cfg.grid) + " block " +
                     dev::to_string(cfg.block));
}

bool CudaDevice::set_programmatic_launch(bool on, std::string* why) {
  std::string reason;
  if (on && arch_ < 90) reason = "programmatic dependent launch needs sm_90 or later; this GPU is sm_" + std::to_string(arch_);
  else if (on && !driver().cuLaunchKernelEx) reason = "the CUDA driver has no cuLaunchKernelEx (CUDA 12.0 or later)";
  if (why) *why = reason;
  programmatic_ = on && reason.empty();
  return programmatic_;
}

void CudaDevice::synchronize() {
  refuse_in_capture("synchronize()");
  make_current();
  driver().check(driver().cuStreamSynchronize(as_stream(stream_)), "cuStreamSynchronize");
}

std::unique_ptr<dev::Event> CudaDevice::record_event() {
  refuse_in_capture("record_event()");
  make_current();
  CUevent e = nullptr;
  driver().check(driver().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  auto event = std::make_unique<CudaEvent>(this, static_cast<CUcontext>(context_), e);
  driver().check(driver().cuEventRecord(e, as_stream(stream_)), "cuEventRecord");
  return event;
}

double CudaDevice::seconds_between(const dev::Event& start, const dev::Event& end) {
  refuse_in_capture("seconds_between()");
  const auto* s = dynamic_cast<const CudaEvent*>(&start);
  const auto* e = dynamic_cast<const CudaEvent*>(&end);
  if (!s || !e || s->owner != this || e->owner != this)
    throw Error("cuda: seconds_between() of an event not recorded on this device", kExitFailure);
  make_current();
  // Both, so that a start recorded after the end cannot be still pending.
  driver().check(driver().cuEventSynchronize(s->event), "cuEventSynchronize (start event)");
  driver().check(driver().cuEventSynchronize(e->event), "cuEventSynchronize (end event)");
  float ms = 0.0f;
  driver().check(driver().cuEventElapsedTime(&ms, s->event, e->event), "cuEventElapsedTime");
  return double(ms) * 1e-3;
}

void CudaDevice::begin_capture() {
  refuse_in_capture("begin_capture()");
  make_current();
  driver().check(driver().cuStreamBeginCapture(as_stream(stream_), CU_STREAM_CAPTURE_MODE_RELAXED),
                 "cuStreamBeginCapture");
  capturing_ = true;
}

std::unique_ptr<dev::Graph> CudaDevice::end_capture() {
  if (!capturing_) throw Error("cuda: end_capture() without begin_capture()", kExitFailure);
  capturing_ = false;
  make_current();
  CUgraph graph = nullptr;
  driver().check(driver().cuStreamEndCapture(as_stream(stream_), &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  const CUresult r = driver().cuGraphInstantiateWithFlags(&exec, graph, 0);
  driver().cuGraphDestroy(graph);  // the executable graph does not need it
  driver().check(r, "cuGraphInstantiateWithFlags");
  return std::make_unique<CudaGraph>(*this, exec);
}

}  // namespace qt::cuda
