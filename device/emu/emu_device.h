#pragma once
// The `emu` device: device/api/device.h on the CPU. Kernels are JIT-compiled with the host compiler
// (cached on disk) and run by the fiber executor with all of its bug checks.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "device/api/device.h"
#include "device/emu/emu_capture.h"
#include "device/emu/executor.h"
#include "device/emu/jit.h"

namespace qt::emu {

struct EmuOptions {
  uint32_t threads = 0;    // host threads running blocks; 0 = $QTUNE_EMU_THREADS or the core count (max 8)
  uint64_t seed = 0;       // scheduling seed; 0 = $QTUNE_EMU_SEED or 1
  bool checks = true;      // race / bounds / alignment checks (instrumented modules); barrier and warp checks always
  int arch = 80;           // QT_ARCH the kernels see
  std::string cache_dir;   // empty: default_cache_dir()
  std::string opt_level = "-O1";
  double watchdog_seconds = 0;  // 0 = $QTUNE_EMU_WATCHDOG or 60: a block spinning this long without progress fails
  bool profile = false;         // count bank conflicts, sectors and bytes per kernel (profiles())
  // The memory the emulator may use, its device memory and the race checks' shadow together, as a GPU has
  // so much memory; 0 = $QTUNE_EMU_MEMORY (bytes), else what the host has available.
  uint64_t memory_bytes = 0;
};

class EmuDevice : public dev::Device {
 public:
  explicit EmuDevice(EmuOptions opts = {});
  ~EmuDevice() override;

  std::string name() const override;
  dev::DeviceFingerprint store_fingerprint() const override;  // winners::emu_fingerprint(arch)
  int arch() const override { return opts_.arch; }

  dev::DevPtr allocate(size_t bytes) override;
  // Device memory is host memory here, and with the checks on each byte a launch touches has a race-shadow
  // cell for the launch's length.
  void check_capacity(uint64_t resident_bytes, uint64_t launch_bytes) const override;
  uint64_t memory_available() const;  // 0 when unknown
  void free(dev::DevPtr p) override;
  void copy_to_device(dev::DevPtr dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, dev::DevPtr src, size_t bytes) override;
  void memset(dev::DevPtr dst, int byte, size_t bytes) override;

  std::shared_ptr<dev::Module> load_module(const dev::ModuleSource& src) override;
  void launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, const dev::KernelArgs& args) override;
  void synchronize() override { refuse_in_capture("synchronize()"); }

  // Capture records into capture_ (emu_capture.cpp); one host thread at a time may use a capturing device.
  std::unique_ptr<dev::Event> record_event() override;
  double seconds_between(const dev::Event& start, const dev::Event& end) override;
  void begin_capture() override;
  std::unique_ptr<dev::Graph> end_capture() override;

  const EmuOptions& options() const { return opts_; }
  ExecStats stats() const { return exec_.stats(); }
  std::vector<KernelProfile> profiles() const { return exec_.profiles(); }
  void clear_profiles() { exec_.clear_profiles(); }
  // Compile statistics of the last load_module call.
  JitResult last_jit() const {
    std::lock_guard<std::mutex> lock(jit_mu_);
    return last_jit_;
  }

 private:
  EmuOptions opts_;
  Executor exec_;
  mutable std::mutex jit_mu_;  // load_module may be called from several host threads
  JitResult last_jit_;
  std::optional<std::vector<CapturedOp>> capture_;  // set between begin_capture() and end_capture()

  friend class EmuGraph;
  void refuse_in_capture(const char* call) const;
};

// Whole file as text; throws qt::Error naming the path.
std::string read_text_file(const std::string& path);

}  // namespace qt::emu
