#include "device/api/device_fingerprint.h"

#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::dev {

namespace {

template <class T>
bool is_unset(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) return v.empty();
  else return v == 0;
}

// The fields of `parts` as a JSON object (nlohmann orders keys, so the dump is canonical).
template <class Keep>
nlohmann::json fields_json(const DeviceFingerprint& d, Keep keep) {
  nlohmann::json j = nlohmann::json::object();
  for_each_fingerprint_field([&](const char* name, auto member, FingerprintPart part, bool optional) {
    if (!keep(part) || (optional && is_unset(d.*member))) return;
    j[name] = d.*member;
  });
  return j;
}

}  // namespace

std::string DeviceFingerprint::key() const { return to_json().dump(); }

std::string DeviceFingerprint::model_key() const {
  return fields_json(*this, [](FingerprintPart p) { return p == FingerprintPart::Model; }).dump();
}

std::string DeviceFingerprint::software_text() const {
  std::string out;
  auto add = [&](const char* label, const std::string& v) {
    if (!v.empty()) out += (out.empty() ? "" : ", ") + std::string(label) + " " + v;
  };
  add("driver", driver);
  add("CUDA", cuda_version);
  add("NVRTC", nvrtc_version);
  add("qtune", qtune_version);
  return out.empty() ? "no software versions" : out;
}

nlohmann::json DeviceFingerprint::to_json() const {
  return fields_json(*this, [](FingerprintPart) { return true; });
}

DeviceFingerprint DeviceFingerprint::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("a device fingerprint must be a JSON object");
  if (!j.contains("name")) throw Error("a device fingerprint needs at least a 'name'");
  DeviceFingerprint d;
  for_each_fingerprint_field([&](const char* name, auto member, FingerprintPart, bool) {
    using T = std::remove_cvref_t<decltype(d.*member)>;
    const auto it = j.find(name);
    if (it == j.end()) return;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) throw Error(std::string("device fingerprint: '") + name + "' is not a string");
      d.*member = it->template get<std::string>();
    } else {
      const bool negative = it->is_number_integer() && !it->is_number_unsigned() && it->template get<int64_t>() < 0;
      if (!it->is_number_integer() || negative || it->template get<uint64_t>() > uint64_t(std::numeric_limits<T>::max()))
        throw Error(std::string("device fingerprint: '") + name + "' is not a count in range");
      d.*member = T(it->template get<uint64_t>());
    }
  });
  return d;
}

}  // namespace qt::dev
