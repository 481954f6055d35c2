#pragma once
// The `cuda` device: device/api/device.h on a real GPU through the lazily loaded driver. Modules are
// compiled by the NVRTC compile service for the device's architecture (through its on-disk cache) and
// loaded with cuModuleLoadData. Without a usable driver the constructor throws qt::Error with exit code
// kExitUnavailable and a one-line reason; cuda_available() asks without throwing.
//
// All work goes to one stream per device, created non-blocking so that it never waits for (or is joined by)
// the legacy default stream: launches, copy_to_device and memset are queued and return at once;
// copy_to_host, synchronize, seconds_between and free wait for the stream. copy_to_device may return before
// the copy has run, but the driver has staged the pageable source by then, so the caller may reuse it. Graphs
// are CUDA graphs made by stream capture (relaxed mode: our own checks refuse what capture cannot record).
// Every driver failure is a qt::Error "<call> <what>: CUDA_ERROR_NAME (description)". A device is meant to
// be used from one host thread at a time.
#include <cstdint>
#include <memory>
#include <string>

#include "device/api/device.h"

namespace qt::cuda {

// "" when a CUDA GPU can be used, else the reason it cannot.
std::string cuda_unavailable_reason();
inline bool cuda_available() { return cuda_unavailable_reason().empty(); }

// What the driver says about the GPU, for result-store fingerprints and for sizing the L2 flush.
struct CudaFacts {
  int sm_count = 0;
  int clock_mhz = 0, mem_clock_mhz = 0;
  int bus_width_bits = 0;
  uint64_t l2_bytes = 0;
  uint64_t memory_bytes = 0;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
};

class CudaDevice : public dev::Device {
 public:
  explicit CudaDevice(int ordinal = 0);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return name_; }
  dev::DeviceFingerprint store_fingerprint() const override;  // cuda_fingerprint.cpp
  int arch() const override { return arch_; }
  const CudaFacts& facts() const { return facts_; }

  dev::DevPtr allocate(size_t bytes) override;
  void free(dev::DevPtr p) override;
  void copy_to_device(dev::DevPtr dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, dev::DevPtr src, size_t bytes) override;
  void memset(dev::DevPtr dst, int byte, size_t bytes) override;

  std::shared_ptr<dev::Module> load_module(const dev::ModuleSource& src) override;
  void launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, const dev::KernelArgs& args) override;
  void synchronize() override;

  std::unique_ptr<dev::Event> record_event() override;
  double seconds_between(const dev::Event& start, const dev::Event& end) override;
  void begin_capture() override;
  std::unique_ptr<dev::Graph> end_capture() override;

  // Programmatic dependent launch (sm_90+): each kernel is launched allowed to start while the previous one in
  // the stream runs, its first statement (qt::grid_dependency_entry, kernels_src/common/qt_cuda_gpu.h) waiting
  // for that kernel's end; a captured decode step keeps these programmatic edges. Off by default. Returns whether
  // it is on: false on a GPU before sm_90 or a driver without cuLaunchKernelEx (`why` says which).
  bool set_programmatic_launch(bool on, std::string* why = nullptr);
  bool programmatic_launch() const { return programmatic_; }

  // For libraries that queue their own work on this device (cuBLASLt): the CUstream everything goes to, and
  // making the device's context current on the calling thread before such a call.
  void* stream() const { return stream_; }
  void make_current() const;

 private:
  friend class CudaGraph;  // replays on stream_
  // Throws the error for `call`, which graph capture cannot record, when a capture is open.
  void refuse_in_capture(const char* call) const;
  int ordinal_ = 0;
  int device_ = 0;           // CUdevice
  void* context_ = nullptr;  // CUcontext (the device's primary context)
  void* stream_ = nullptr;   // CUstream
  bool capturing_ = false;
  int arch_ = 0;
  CudaFacts facts_;
  bool programmatic_ = false;
  std::string name_;
};

}  // namespace qt::cuda
