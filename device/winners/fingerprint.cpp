#include "device/winners/fingerprint.h"

#include <sys/sysinfo.h>

#include <fstream>
#include <thread>

#include "common/cpu_info.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"

#ifndef QTUNE_VERSION
#define QTUNE_VERSION "0"
#endif

namespace qt::winners {

namespace {

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown cpu";
}

}  // namespace

DeviceFingerprint cpu_fingerprint() {
  DeviceFingerprint d;
  d.name = "cpu: " + cpu_model_name();
  std::string isa = "x86_64";
  const rt::Isa best = rt::detect_isa();
  isa += std::string("-") + rt::isa_name(best);
  d.arch = isa;
  d.sm_count = std::max(1, int(std::thread::hardware_concurrency()));
  struct sysinfo si{};
  if (sysinfo(&si) == 0) d.memory_bytes = uint64_t(si.totalram) * si.mem_unit;
  d.l2_bytes = cpu_last_level_cache_bytes(0);
  d.qtune_version = QTUNE_VERSION;
  return d;
}

DeviceFingerprint emu_fingerprint(int arch) {
  DeviceFingerprint d;
  d.name = "emu";
  d.arch = "sm_" + std::to_string(arch);
  d.qtune_version = QTUNE_VERSION;
  return d;
}

}  // namespace qt::winners
