#include "device/emu/emu_device.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/host_memory.h"
#include "device/winners/fingerprint.h"
#include "device/emu/arena.h"
#include "device/emu/race_shadow.h"

namespace qt::emu {

namespace {

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (*end != '\0') throw qt::Error(std::string("emu: ") + name + "='" + v + "' is not a number", kExitBadInput);
  return x;
}

EmuOptions resolve(EmuOptions o) {
  const uint64_t threads = o.threads ? o.threads : env_u64("QTUNE_EMU_THREADS", 0);
  // The bound of every --threads flag (0 is the default, not a count): each host thread runs blocks with its
  // own fiber stacks.
  if (threads > uint64_t(flag_ranges::kThreads.hi))
    throw qt::Error("emu: " + std::to_string(threads) + " host threads is out of range (" +
                        range_text(flag_ranges::kThreads) + ")",
                    kExitBadInput);
  o.threads = static_cast<uint32_t>(threads);
  if (o.seed == 0) o.seed = env_u64("QTUNE_EMU_SEED", 1);
  if (o.watchdog_seconds <= 0) o.watchdog_seconds = static_cast<double>(env_u64("QTUNE_EMU_WATCHDOG", 60));
  if (o.memory_bytes == 0) o.memory_bytes = env_u64("QTUNE_EMU_MEMORY", 0);
  return o;
}

ExecOptions exec_options(const EmuOptions& o) {
  ExecOptions e;
  e.threads = o.threads;
  e.seed = o.seed;
  e.race_checks = o.checks;
  e.watchdog_seconds = o.watchdog_seconds;
  e.profile = o.profile;
  e.memory_bytes = o.memory_bytes;
  return e;
}

struct KernelEntryInfo {
  KernelEntry fn = nullptr;
  std::vector<uint32_t> arg_sizes;
};

class EmuModule : public dev::Module {
 public:
  EmuModule(const dev::ModuleSource& src, const std::string& so_path, const Api* api) : src_(src), so_path_(so_path) {
    handle_ = ::dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw qt::Error("emu: cannot load kernel module " + so_path + ": " + ::dlerror(), kExitFailure);
    auto abi = reinterpret_cast<uint32_t (*)()>(::dlsym(handle_, "qt_emu_abi_version"));
    auto bind = reinterpret_cast<void (*)(const Api*)>(::dlsym(handle_, "qt_emu_bind"));
    if (!abi || !bind || abi() != kAbiVersion) {
      throw qt::Error("emu: " + so_path + " was built for another emulator ABI; clear the JIT cache", kExitFailure);
    }
    for (size_t i = 0; i < src.kernels.size(); ++i) {
      const std::string n = "qt_emu_kernel_" + std::to_string(i);
      KernelEntryInfo e;
      e.fn = reinterpret_cast<KernelEntry>(::dlsym(handle_, n.c_str()));
      auto sig = reinterpret_cast<uint32_t (*)(uint32_t*, uint32_t)>(::dlsym(handle_, (n + "_sig").c_str()));
      if (!e.fn || !sig) throw qt::Error("emu: module " + so_path + " lacks the entry for " + src.kernels[i], kExitFailure);
      uint32_t sizes[256];
      const uint32_t count = sig(sizes, 256);
      e.arg_sizes.assign(sizes, sizes + std::min<uint32_t>(count, 256));
      entries_.push_back(std::move(e));
    }
    // Bound last: before binding, the module's access hooks ignore every access (nothing runs in a fiber yet).
    bind(api);
  }
  ~EmuModule() override {
    if (handle_) ::dlclose(handle_);
  }
  dev::Kernel kernel(std::string_view name_expression) const override {
    for (size_t i = 0; i < src_.kernels.size(); ++i) {
      if (src_.kernels[i] == name_expression) return dev::Kernel{this, i};
    }
    throw qt::Error("emu: module " + src_.name + " has no kernel '" + std::string(name_expression) +
                        "' (name expressions must match ModuleSource::kernels exactly)",
                    kExitBadInput);
  }
  const dev::ModuleSource& source() const override { return src_; }
  const KernelEntryInfo& entry(size_t i) const { return entries_.at(i); }
  const std::string& so_path() const { return so_path_; }

 private:
  dev::ModuleSource src_;
  std::string so_path_;
  void* handle_ = nullptr;
  std::vector<KernelEntryInfo> entries_;
};

}  // namespace

EmuDevice::EmuDevice(EmuOptions opts) : opts_(resolve(std::move(opts))), exec_(exec_options(opts_)) {}

EmuDevice::~EmuDevice() = default;

std::string EmuDevice::name() const {
  return "emu (" + std::to_string(exec_.options().threads) + " host threads, seed " + std::to_string(opts_.seed) +
         ", checks " + (opts_.checks ? "on" : "off") + ", sm" + std::to_string(opts_.arch) + ")";
}

dev::DeviceFingerprint EmuDevice::store_fingerprint() const { return winners::emu_fingerprint(opts_.arch); }

// What the emulator may still take: its own limit, when it has one, and what the host has available.
uint64_t EmuDevice::memory_available() const {
  const uint64_t host = host_memory_available();
  if (opts_.memory_bytes == 0) return host;
  const uint64_t live = Arena::instance().live_bytes();
  const uint64_t left = opts_.memory_bytes > live ? opts_.memory_bytes - live : 0;
  return host == 0 ? left : std::min(host, left);
}

void EmuDevice::check_capacity(uint64_t resident_bytes, uint64_t launch_bytes) const {
  const uint64_t shadow = opts_.checks ? launch_bytes * sizeof(exec::Cell) : 0;
  const uint64_t need = resident_bytes + shadow, have = memory_available();
  if (have == 0 || need <= have) return;  // unknown: allocate() still fails cleanly
  throw qt::Error("emu: the model needs about " + bytes_text(need) + " of memory on the emulator (" +
                      bytes_text(resident_bytes) + " of weights" +
                      (shadow ? ", " + bytes_text(shadow) + " to check its largest launch for races" : "") +
                      "), more than the " + bytes_text(have) + " available" +
                      (shadow && resident_bytes <= have ? "; without the race checks (qrun --no-checks) it fits" : "") +
                      "; --device cpu runs it from the file",
                  kExitBadInput);
}

dev::DevPtr EmuDevice::allocate(size_t bytes) {
  refuse_in_capture("allocate()");
  if (opts_.memory_bytes && Arena::instance().live_bytes() + bytes > opts_.memory_bytes) {
    throw qt::Error("emu: out of device memory: " + bytes_text(bytes) + " asked for with " +
                        bytes_text(Arena::instance().live_bytes()) + " of the emulator's " +
                        bytes_text(opts_.memory_bytes) + " in use",
                    kExitFailure);
  }
  return dev::DevPtr{Arena::instance().allocate(bytes)};
}

void EmuDevice::free(dev::DevPtr p) {
  if (p) refuse_in_capture("free()");
  Arena::instance().free(p.addr);
}

void EmuDevice::copy_to_device(dev::DevPtr dst, const void* src, size_t bytes) {
  refuse_in_capture("copy_to_device()");
  if (bytes == 0) return;
  Arena::instance().check_range(dst.addr, bytes, "copy to device");
  std::memcpy(reinterpret_cast<void*>(dst.addr), src, bytes);
}

void EmuDevice::copy_to_host(void* dst, dev::DevPtr src, size_t bytes) {
  refuse_in_capture("copy_to_host()");
  if (bytes == 0) return;
  Arena::instance().check_range(src.addr, bytes, "copy to host");
  std::memcpy(dst, reinterpret_cast<const void*>(src.addr), bytes);
}

void EmuDevice::memset(dev::DevPtr dst, int byte, size_t bytes) {
  if (bytes == 0) return;
  Arena::instance().check_range(dst.addr, bytes, "memset");
  if (capture_) {
    capture_->push_back(CapturedOp{dev::Kernel{}, {}, {}, dst, byte, bytes});
    return;
  }
  std::memset(reinterpret_cast<void*>(dst.addr), byte, bytes);
}

std::shared_ptr<dev::Module> EmuDevice::load_module(const dev::ModuleSource& src) {
  JitOptions jo;
  jo.opt_level = opts_.opt_level;
  jo.instrument = opts_.checks;
  jo.arch = opts_.arch;
  jo.cache_dir = opts_.cache_dir;
  const JitResult r = jit_compile(src, jo);
  {
    std::lock_guard<std::mutex> lock(jit_mu_);
    last_jit_ = r;
  }
  return std::make_shared<EmuModule>(src, r.so_path, exec_.api());
}

void EmuDevice::launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, const dev::KernelArgs& args) {
  const auto* mod = dynamic_cast<const EmuModule*>(kernel.module);
  if (!mod) throw qt::Error("emu: launch of a kernel that was not loaded by the emu device", kExitFailure);
  const KernelEntryInfo& e = mod->entry(kernel.index);
  const std::string& kname = mod->source().kernels[kernel.index];
  if (args.size() != e.arg_sizes.size()) {
    throw qt::Error("emu: launch of " + kname + " with " + std::to_string(args.size()) + " arguments; the kernel takes " +
                        std::to_string(e.arg_sizes.size()),
                    kExitFailure);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args.arg_size(i) != e.arg_sizes[i]) {
      throw qt::Error("emu: launch of " + kname + ": argument " + std::to_string(i) + " has " +
                          std::to_string(args.arg_size(i)) + " bytes, the kernel's parameter has " +
                          std::to_string(e.arg_sizes[i]),
                      kExitFailure);
    }
  }
  if (capture_) {
    dev::validate_launch(cfg, kname);
    capture_->push_back(CapturedOp{kernel, cfg, args, {}, 0, 0});
    return;
  }
  std::vector<void*> ptrs = args.pointers();
  LaunchRequest req;
  req.entry = e.fn;
  req.args = ptrs.data();
  req.cfg = cfg;
  req.kernel_name = kname;
  exec_.run(req);
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw qt::Error(path + ": cannot open kernel source", kExitBadInput);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace qt::emu
