#pragma once
// What identifies the device a tuned result was measured on. Its fields are named once, in
// for_each_fingerprint_field(): the JSON form (the store's fingerprint column, exports), the store's
// device columns and their INSERT all come from that list, so a field cannot be lost on one of the ways.
//
// Two identities: the exact one (every field; a store row is this device's own measurement) and the
// hardware model (name, architecture, SM count, memory). Rows of the same model measured under another
// driver, toolkit or qtune version are still timings of this GPU, so the runtime uses them and says so.
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace qt::dev {

struct DeviceFingerprint {
  std::string name;     // "NVIDIA H200", "cpu: AMD EPYC ...", "emu"
  std::string arch;     // "sm_90", "x86_64-avx2"
  int sm_count = 0;     // SMs, or CPU cores
  uint64_t memory_bytes = 0;
  int clock_mhz = 0, mem_clock_mhz = 0;
  uint64_t l2_bytes = 0;
  int bus_width_bits = 0;  // GPUs only; with mem_clock_mhz it gives the DRAM bandwidth
  std::string driver, cuda_version, nvrtc_version, qtune_version;

  bool operator==(const DeviceFingerprint& o) const { return key() == o.key(); }
  bool operator!=(const DeviceFingerprint& o) const { return !(*this == o); }
  std::string key() const;        // canonical JSON of every field: the exact identity
  std::string model_key() const;  // canonical JSON of the hardware-model fields
  bool same_model(const DeviceFingerprint& o) const { return model_key() == o.model_key(); }
  // "driver 13.0, CUDA 13.0, NVRTC 13.0, qtune 0.1.0": the software side, for messages.
  std::string software_text() const;
  nlohmann::json to_json() const;
  // Throws qt::Error naming the field that is missing or of the wrong type ("name" is required; a field
  // absent from an older store's JSON keeps its default).
  static DeviceFingerprint from_json(const nlohmann::json& j);
};

// Which identity a field belongs to: Model fields make the hardware-model key; Hardware fields (clocks, caches,
// bus) describe the part further but may differ between boards of one model (power limits, MIG). `optional` fields are left out of the JSON while 0, so fingerprints
// written before the field existed keep their text (bus_width_bits came after the first stores).
enum class FingerprintPart { Model, Hardware, Software };

// Calls visit(name, member pointer, part, optional) for every field, in one fixed order. The member
// pointer's type is std::string, int or uint64_t.
template <class Visit>
void for_each_fingerprint_field(Visit&& visit) {
  using F = DeviceFingerprint;
  using P = FingerprintPart;
  visit("name", &F::name, P::Model, false);
  visit("arch", &F::arch, P::Model, false);
  visit("sm_count", &F::sm_count, P::Model, false);
  visit("memory_bytes", &F::memory_bytes, P::Model, false);
  visit("clock_mhz", &F::clock_mhz, P::Hardware, false);
  visit("mem_clock_mhz", &F::mem_clock_mhz, P::Hardware, false);
  visit("l2_bytes", &F::l2_bytes, P::Hardware, false);
  visit("bus_width_bits", &F::bus_width_bits, P::Hardware, true);
  visit("driver", &F::driver, P::Software, false);
  visit("cuda_version", &F::cuda_version, P::Software, false);
  visit("nvrtc_version", &F::nvrtc_version, P::Software, false);
  visit("qtune_version", &F::qtune_version, P::Software, false);
}

}  // namespace qt::dev
