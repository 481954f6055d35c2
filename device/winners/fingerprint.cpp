#include "device/winners/fingerprint.h"

#include <sys/sysinfo.h>

#include <fstream>
#include <thread>

#include "common/cpu_info.h"
#include "common/error.h"
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

std::string DeviceFingerprint::key() const { return to_json().dump(); }

nlohmann::json DeviceFingerprint::to_json() const {
  nlohmann::json j = {{"name", name},
          {"arch", arch},
          {"sm_count", sm_count},
          {"memory_bytes", memory_bytes},
          {"clock_mhz", clock_mhz},
          {"mem_clock_mhz", mem_clock_mhz},
          {"l2_bytes", l2_bytes},
          {"driver", driver},
          {"cuda_version", cuda_version},
          {"nvrtc_version", nvrtc_version},
          {"qtune_version", qtune_version}};
  // Only where known, so that the keys of CPU and emulator rows stored before the field existed still match.
  if (bus_width_bits != 0) j["bus_width_bits"] = bus_width_bits;
  return j;
}

DeviceFingerprint DeviceFingerprint::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("name")) throw Error("device fingerprint needs at least a 'name'");
  DeviceFingerprint d;
  d.name = j.value("name", "");
  d.arch = j.value("arch", "");
  d.sm_count = j.value("sm_count", 0);
  d.memory_bytes = j.value("memory_bytes", uint64_t(0));
  d.clock_mhz = j.value("clock_mhz", 0);
  d.mem_clock_mhz = j.value("mem_clock_mhz", 0);
  d.l2_bytes = j.value("l2_bytes", uint64_t(0));
  d.bus_width_bits = j.value("bus_width_bits", 0);
  d.driver = j.value("driver", "");
  d.cuda_version = j.value("cuda_version", "");
  d.nvrtc_version = j.value("nvrtc_version", "");
  d.qtune_version = j.value("qtune_version", "");
  return d;
}

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

DeviceFingerprint gpu_fingerprint(const std::string& name, int arch) {
  DeviceFingerprint d;
  d.name = name;
  d.arch = "sm_" + std::to_string(arch);
  d.qtune_version = QTUNE_VERSION;
  return d;
}

}  // namespace qt::winners
