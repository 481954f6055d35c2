#include "kernels_src/registry/stored_point.h"

#include <cerrno>
#include <cstdlib>

#include "common/error.h"

namespace qt::kernels {

std::optional<Point> point_from_json(const KernelFamily& f, const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  Point p;
  for (const Param& param : f.params) {
    if (!j.contains(param.name)) {
      if (!param.absent_value) return std::nullopt;
      p[param.name] = *param.absent_value;
      continue;
    }
    const nlohmann::json& v = j.at(param.name);
    if (v.is_number_integer()) {
      p[param.name] = v.get<int64_t>();
    } else if (v.is_string()) {
      const auto value = label_value(param, v.get<std::string>());
      if (!value) return std::nullopt;
      p[param.name] = *value;
    } else {
      return std::nullopt;
    }
  }
  try {
    validate_point(f, p);
  } catch (const Error&) {
    return std::nullopt;
  }
  return p;
}

std::optional<Point> point_from_text(const KernelFamily& f, const std::string& text) {
  nlohmann::json j = nlohmann::json::object();
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || j.contains(item.substr(0, eq))) return std::nullopt;
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    char* stop = nullptr;
    errno = 0;
    const long long v = std::strtoll(value.c_str(), &stop, 10);
    if (!value.empty() && *stop == '\0' && errno == 0) j[name] = int64_t(v);
    else j[name] = value;  // a label
    begin = end + 1;
  }
  return point_from_json(f, j);
}

}  // namespace qt::kernels
