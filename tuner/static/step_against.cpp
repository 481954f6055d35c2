#include "tuner/static/step_against.h"

#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "kernels_src/registry/registry.h"

namespace qt::tune {
namespace {

constexpr const char* kBlas = "cuBLASLt";

// A library call's name ("cuBLASLt 512x4096x4096") under one key, as the model names it.
std::string kernel_key(const std::string& name) { return name.rfind(kBlas, 0) == 0 ? kBlas : name; }

nlohmann::json read_times(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read", kExitBadInput);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(path + ": not a launch-times file (" + e.what() + ")", kExitBadInput);
  }
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string() ||
      j["schema"].get<std::string>() != "qtune-launch-times/1" || !j.contains("steps") || !j["steps"].is_array())
    throw Error(path + ": not a launch-times file (qrun --launch-times writes schema \"qtune-launch-times/1\")",
                kExitBadInput);
  return j;
}

}  // namespace

std::map<std::string, KernelTimes> predicted_kernels(const StepPrediction& p) {
  std::map<std::string, KernelTimes> rows;
  for (const LaunchPrediction& l : p.launches) {
    const LaunchEstimate& d = l.by_default;
    const double count = double(l.launch.count), body = d.e.seconds - d.e.launch_s;
    if (d.point.empty()) {  // cuBLASLt
      KernelTimes& k = rows[kBlas];
      k.predicted_launches += count;
      k.predicted_s += count * body;
      continue;
    }
    const kernels::KernelFamily& f = kernels::find_family(d.family);
    const kernels::LaunchPlan plan = f.plan(kernels::parse_point(f, d.point), l.launch.shape);
    const size_t main = kernels::main_launch(plan);
    for (size_t i = 0; i < plan.launches.size(); ++i) {
      KernelTimes& k = rows[plan.launches[i].kernel];
      k.predicted_launches += count;
      if (i == main) k.predicted_s += count * body;
    }
  }
  for (auto& [name, k] : rows) k.kernel = name;
  return rows;
}

LaunchComparison compare_launches(const StepPrediction& p, const std::string& path, bool decode, int64_t prompt,
                                  double stream_launch_us) {
  const nlohmann::json j = read_times(path);
  LaunchComparison c;
  if (j.contains("device") && j["device"].is_object() && j["device"].contains("name") && j["device"]["name"].is_string())
    c.device = j["device"]["name"].get<std::string>();
  std::map<std::string, KernelTimes> rows;
  const int64_t want = decode ? 1 : prompt;
  std::vector<int64_t> seen;
  try {
    for (const nlohmann::json& step : j["steps"]) {
      const int64_t r = step.at("rows").get<int64_t>();
      seen.push_back(r);
      if (r != want) continue;
      ++c.steps;
      c.measured_step_s += step.at("seconds").get<double>();
      for (const nlohmann::json& l : step.at("launches")) {
        KernelTimes& k = rows[kernel_key(l.at("kernel").get<std::string>())];
        k.measured_launches += 1;
        k.measured_s += l.at("seconds").get<double>();
        c.measured_kernels_s += l.at("seconds").get<double>();
        c.measured_launches += 1;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": a step or launch without its fields (" + e.what() + ")", kExitBadInput);
  }
  if (c.steps == 0) {
    std::string have;
    for (int64_t r : seen) have += (have.empty() ? "" : ", ") + std::to_string(r);
    throw Error(path + ": no step of " + std::to_string(want) + " row" + (want == 1 ? "" : "s") + " (its steps: " +
                    (have.empty() ? "none" : have) + ")" + (decode ? "" : "; --prompt must be the prompt qrun ran"),
                kExitBadInput);
  }
  const double n = double(c.steps);
  c.measured_step_s /= n, c.measured_kernels_s /= n, c.measured_launches /= n;
  for (auto& [name, k] : rows) k.measured_launches /= n, k.measured_s /= n;

  for (const auto& [name, k] : predicted_kernels(p)) {
    KernelTimes& r = rows[name];
    r.predicted_launches = k.predicted_launches;
    r.predicted_s = k.predicted_s;
    c.predicted_launches += k.predicted_launches;
    c.predicted_kernels_s += k.predicted_s;
  }
  c.predicted_launch_cost_s = c.predicted_launches * stream_launch_us * 1e-6;
  for (auto& [name, k] : rows) {
    k.kernel = name;
    c.kernels.push_back(k);
  }
  std::sort(c.kernels.begin(), c.kernels.end(), [](const KernelTimes& a, const KernelTimes& b) {
    return std::max(a.measured_s, a.predicted_s) > std::max(b.measured_s, b.predicted_s);
  });
  return c;
}

}  // namespace qt::tune
