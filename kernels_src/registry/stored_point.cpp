#include "kernels_src/registry/stored_point.h"

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

}  // namespace qt::kernels
