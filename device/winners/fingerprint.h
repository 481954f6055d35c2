#pragma once
// What identifies the device a tuned result was measured on. Rows match devices by every field, so a driver
// or toolkit upgrade, or another GPU of the same name with other clocks, never inherits winners silently.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace qt::winners {

struct DeviceFingerprint {
  std::string name;     // "NVIDIA A100-PCIE-40GB", "cpu: AMD EPYC ..."
  std::string arch;     // "sm_80", "x86_64-avx2"
  int sm_count = 0;     // SMs, or CPU cores
  uint64_t memory_bytes = 0;
  int clock_mhz = 0, mem_clock_mhz = 0;
  uint64_t l2_bytes = 0;
  int bus_width_bits = 0;  // GPUs only; with mem_clock_mhz it gives the DRAM bandwidth
  std::string driver, cuda_version, nvrtc_version, qtune_version;

  std::string key() const;  // canonical text of every field; rows match devices by it
  nlohmann::json to_json() const;
  static DeviceFingerprint from_json(const nlohmann::json& j);
};

// This CPU: model name, best instruction set, threads, memory, last-level cache.
DeviceFingerprint cpu_fingerprint();
// The CPU emulator of an architecture: its results are correctness only, so nothing of the host enters.
DeviceFingerprint emu_fingerprint(int arch = 80);
// A CUDA GPU by name and compute capability (e.g. 90).
DeviceFingerprint gpu_fingerprint(const std::string& name, int arch);

}  // namespace qt::winners
