#include "tuner/family/family.h"

#include <map>
#include <mutex>

#include "common/error.h"

namespace qt::tune {

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::shared_ptr<KernelFamily>>& registry() {
  static std::map<std::string, std::shared_ptr<KernelFamily>> r;
  return r;
}
}  // namespace

Space KernelFamily::space(const std::vector<int64_t>& shape) const {
  return Space::cartesian(params(shape), [&](const std::vector<double>& v) { return valid(shape, v); });
}

void register_family(std::shared_ptr<KernelFamily> f) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[f->name()] = std::move(f);
}

std::shared_ptr<KernelFamily> find_family(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(name);
  if (it == registry().end()) throw Error("unknown kernel family '" + name + "'");
  return it->second;
}

std::vector<std::string> family_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (const auto& [n, f] : registry()) out.push_back(n);
  return out;
}

}  // namespace qt::tune
