#pragma once
// The device interface shared by the CPU emulator (`emu`, device/emu/) and the CUDA driver device
// (device/cuda/). A kernel module is built from kernel source text plus the name expressions of the
// kernels to instantiate (the same strings NVRTC takes, e.g. "awq_gemm<64, 128, 32, 4, 3>"), so one
// kernels_src/ file serves both devices. Failures (bad launch configuration, compile errors, and on the
// emulator every detected kernel bug) are thrown as qt::Error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "device/api/device_fingerprint.h"

namespace qt::dev {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
};

// A device address. On the emulator it is a host address; on CUDA a CUdeviceptr. Kernel parameters
// declared as pointers receive it unchanged (KernelArgs::add(DevPtr) passes 8 bytes).
struct DevPtr {
  uint64_t addr = 0;
  explicit operator bool() const { return addr != 0; }
  DevPtr offset(size_t bytes) const { return DevPtr{addr + bytes}; }
};

// Kernel source and what to build from it.
struct ModuleSource {
  std::string name;                  // for messages and cache keys, e.g. "awq/gemm"
  std::string source;                // full text of the .cu file (it includes "kernels_src/common/qt_cuda.h")
  std::vector<std::string> kernels;  // name expressions to instantiate, e.g. "reduce_sum<256>"
  std::vector<std::pair<std::string, std::string>> defines;  // -DNAME=VALUE on both devices
  std::vector<std::string> include_dirs;  // extra include dirs; the repository root is always on the path
  std::vector<std::string> cuda_options;  // extra NVRTC options (ignored by the emulator)
};

class Module;

// A kernel inside a loaded module; valid as long as its module is.
struct Kernel {
  const Module* module = nullptr;
  size_t index = 0;  // position in ModuleSource::kernels
  explicit operator bool() const { return module != nullptr; }
};

// Launch arguments in parameter order, each copied by value (as cuLaunchKernel's kernelParams would be).
class KernelArgs {
 public:
  template <class T>
  KernelArgs& add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments must be trivially copyable");
    Arg a;
    a.offset = bytes_.size();
    a.size = sizeof(T);
    bytes_.resize(bytes_.size() + ((sizeof(T) + 15) & ~size_t{15}));
    std::memcpy(bytes_.data() + a.offset, &value, sizeof(T));
    args_.push_back(a);
    return *this;
  }
  KernelArgs& add(DevPtr p) { return add(p.addr); }
  size_t size() const { return args_.size(); }
  size_t arg_size(size_t i) const { return args_[i].size; }
  // Pointers to each argument's bytes, the `void** kernelParams` form. Valid until the next add().
  std::vector<void*> pointers() const {
    std::vector<void*> p;
    for (const Arg& a : args_) p.push_back(const_cast<unsigned char*>(bytes_.data() + a.offset));
    return p;
  }

 private:
  struct Arg {
    size_t offset, size;
  };
  std::vector<unsigned char> bytes_;
  std::vector<Arg> args_;
};

struct LaunchConfig {
  LaunchConfig() = default;
  LaunchConfig(Dim3 grid_, Dim3 block_, uint32_t dynamic_smem_bytes_ = 0, Dim3 cluster_ = {})
      : grid(grid_), block(block_), dynamic_smem_bytes(dynamic_smem_bytes_), cluster(cluster_) {}
  Dim3 grid;
  Dim3 block;
  uint32_t dynamic_smem_bytes = 0;
  // Thread block clusters (sm_90): CTAs per cluster along each dimension, dividing the grid; at most 8 in all
  // (the portable cluster size). 1x1x1 is a launch without clusters.
  Dim3 cluster;
};
constexpr uint64_t kMaxClusterSize = 8;

class Module {
 public:
  virtual ~Module() = default;
  // The kernel for a name expression given in ModuleSource::kernels (exact string); throws if absent.
  virtual Kernel kernel(std::string_view name_expression) const = 0;
  virtual const ModuleSource& source() const = 0;
};

// A point on the device's stream, for timing work between two of them (Device::seconds_between).
class Event {
 public:
  virtual ~Event() = default;
};

// A recorded sequence of launches and memsets (a CUDA graph on a GPU), replayed as one unit: the same kernels
// with the same configurations and argument bytes, in the order they were issued. Arguments are captured by
// value, so data that changes between replays (a token, a position) must live in device memory that the
// caller writes with copy_to_device before replay(). A Graph must not outlive its device, the modules of its
// kernels, or the buffers it uses.
class Graph {
 public:
  virtual ~Graph() = default;
  // Queues the whole sequence on the device's stream (asynchronous on a GPU, like a launch).
  virtual void replay() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;         // "emu (2 threads, checks on)", "NVIDIA H100 80GB HBM3"
  // The identity tuning stores file this device's results under (device_fingerprint.h). Every caller takes
  // it from here, so the tuner's worker, qrun and qbench cannot build different keys for one device.
  virtual DeviceFingerprint store_fingerprint() const = 0;
  virtual int arch() const = 0;                 // compute capability as 80, 86, 89, 90 (emu: the emulated one)

  virtual DevPtr allocate(size_t bytes) = 0;  // fresh memory is NOT zeroed (the emulator fills it with 0xFF)
  // Throws qt::Error (exit 2) stating the memory it would need when the device cannot hold `resident_bytes`
  // of allocations while a launch touches up to `launch_bytes` of them: a model refused up front, not
  // failing after minutes of loading. The default leaves it to allocate().
  virtual void check_capacity(uint64_t resident_bytes, uint64_t launch_bytes) const {
    (void)resident_bytes, (void)launch_bytes;
  }
  virtual void free(DevPtr p) = 0;
  virtual void copy_to_device(DevPtr dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, DevPtr src, size_t bytes) = 0;
  virtual void memset(DevPtr dst, int byte, size_t bytes) = 0;

  virtual std::shared_ptr<Module> load_module(const ModuleSource& src) = 0;
  virtual void launch(const Kernel& kernel, const LaunchConfig& cfg, const KernelArgs& args) = 0;
  virtual void synchronize() = 0;

  // Records an event on the device's stream, after everything queued so far.
  virtual std::unique_ptr<Event> record_event() = 0;
  // Seconds between two events recorded on this device, waiting for `end` to complete. Throws qt::Error for
  // an event of another kind of device.
  virtual double seconds_between(const Event& start, const Event& end) = 0;

  // Graph capture. Between begin_capture() and end_capture(), launch() and memset() are recorded instead of
  // run, and end_capture() returns the recording. A launch is still checked when it is recorded (its
  // configuration, and on the emulator its arguments), so a bad one throws there. load_module() stays
  // allowed. Everything else that touches device memory or waits for the device throws qt::Error naming the
  // call: allocate, free, copy_to_device, copy_to_host, synchronize, record_event, seconds_between,
  // Graph::replay and a nested begin_capture(). copy_to_device is refused because a graph would replay the
  // host bytes as they were at capture time (or read host memory freed since): write per-step data to device
  // memory before replay() instead. A Buffer that dies during capture leaks (see ~Buffer). end_capture()
  // without begin_capture() throws. end_capture() always ends the capture, also when it throws (on CUDA, a
  // launch the driver rejected during capture invalidates the capture, and end_capture() reports that).
  virtual void begin_capture() = 0;
  virtual std::unique_ptr<Graph> end_capture() = 0;
};

// RAII device buffer.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& dev, size_t bytes) : dev_(&dev), ptr_(dev.allocate(bytes)), bytes_(bytes) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release_quietly();
      dev_ = std::exchange(o.dev_, nullptr);
      ptr_ = std::exchange(o.ptr_, DevPtr{});
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  // A destructor must not throw: a Buffer dying during graph capture (where free() throws), e.g. while an
  // error unwinds the stack, leaks its memory with a line on stderr instead of ending the process.
  ~Buffer() { release_quietly(); }
  void reset() {
    if (dev_ && ptr_) dev_->free(ptr_);
    dev_ = nullptr;
    ptr_ = DevPtr{};
    bytes_ = 0;
  }
  DevPtr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  void upload(const std::vector<T>& v) {
    check_size(v.size() * sizeof(T));
    dev_->copy_to_device(ptr_, v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download(size_t count) const {
    check_count(count, sizeof(T));
    std::vector<T> v(count);
    dev_->copy_to_host(v.data(), ptr_, count * sizeof(T));
    return v;
  }

 private:
  void release_quietly() noexcept;
  void check_size(size_t n) const;
  // Compares element counts: count * elem_bytes could wrap to a small size that passes check_size.
  void check_count(size_t count, size_t elem_bytes) const;
  Device* dev_ = nullptr;
  DevPtr ptr_;
  size_t bytes_ = 0;
};

// "(x,y,z)" for messages.
std::string to_string(const Dim3& d);
// Rejects a launch configuration no CUDA device accepts (empty grid/block, > 1024 threads per block,
// grid.y/z > 65535, block.z > 64, dynamic shared memory > 227 KiB) with a qt::Error naming the value.
void validate_launch(const LaunchConfig& cfg, std::string_view kernel_name);

}  // namespace qt::dev
