#pragma once
// Shared helpers of the emulator tests: one emu device per test process with its JIT cache in the build
// tree, and modules compiled once per process (and once per build thanks to the disk cache).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/emu/emu_device.h"
#include "common/paths.h"

namespace qt::emu::test {

inline std::string cache_dir() { return qt::binary_root() + "/emu-cache"; }

inline EmuOptions test_options(uint64_t seed = 1, int arch = 80) {
  EmuOptions o;
  o.seed = seed;
  o.arch = arch;
  o.cache_dir = cache_dir();
  return o;
}

inline EmuDevice& device() {
  static EmuDevice dev(test_options());
  return dev;
}

// For the sm_90a kernels (wgmma, setmaxnreg need QT_ARCH 90).
inline EmuDevice& sm90_device() {
  static EmuDevice dev(test_options(1, 90));
  return dev;
}

// The module built from tests/emu/kernels/<file> with the given kernels (compiled once per process).
inline std::shared_ptr<dev::Module> module(const std::string& file, const std::vector<std::string>& kernels,
                                           EmuDevice& dev = device()) {
  static std::map<std::string, std::shared_ptr<dev::Module>> loaded;
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(&dev)) + "|" + file;
  for (const auto& k : kernels) key += "|" + k;
  auto it = loaded.find(key);
  if (it != loaded.end()) return it->second;
  dev::ModuleSource src;
  src.name = file;
  src.source = read_text_file(qt::source_root() + "/tests/emu/kernels/" + file);
  src.kernels = kernels;
  auto m = dev.load_module(src);
  loaded[key] = m;
  return m;
}

}  // namespace qt::emu::test
