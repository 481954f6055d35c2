#pragma once
// The `cuda` device: device/api/device.h on a real GPU through the lazily loaded driver. Modules are
// compiled by the NVRTC compile service for the device's architecture (through its on-disk cache) and
// loaded with cuModuleLoadData. Without a usable driver the constructor throws qt::Error with exit code
// kExitUnavailable and a one-line reason; cuda_available() asks without throwing.
#include <memory>
#include <string>

#include "device/api/device.h"

namespace qt::cuda {

// "" when a CUDA GPU can be used, else the reason it cannot.
std::string cuda_unavailable_reason();
inline bool cuda_available() { return cuda_unavailable_reason().empty(); }

class CudaDevice : public dev::Device {
 public:
  explicit CudaDevice(int ordinal = 0);
  ~CudaDevice() override;

  std::string name() const override { return name_; }
  std::string fingerprint() const override { return fingerprint_; }
  int arch() const override { return arch_; }

  dev::DevPtr allocate(size_t bytes) override;
  void free(dev::DevPtr p) override;
  void copy_to_device(dev::DevPtr dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, dev::DevPtr src, size_t bytes) override;
  void memset(dev::DevPtr dst, int byte, size_t bytes) override;

  std::shared_ptr<dev::Module> load_module(const dev::ModuleSource& src) override;
  void launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, const dev::KernelArgs& args) override;
  void synchronize() override;

 private:
  void make_current() const;
  int ordinal_ = 0;
  int device_ = 0;  // CUdevice
  void* context_ = nullptr;  // CUcontext
  int arch_ = 0;
  std::string name_, fingerprint_;
};

}  // namespace qt::cuda
