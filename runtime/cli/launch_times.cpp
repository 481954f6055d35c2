#include "runtime/cli/launch_times.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::rt {

LaunchTimeSummary summarize_launch_times(const std::vector<LaunchQueue::TimedStep>& steps) {
  LaunchTimeSummary s;
  std::vector<const LaunchQueue::TimedStep*> chosen;
  for (const auto& st : steps)
    if (st.rows == 1) chosen.push_back(&st);
  s.decode = !chosen.empty();
  if (chosen.empty())
    for (const auto& st : steps) chosen.push_back(&st);
  if (chosen.empty()) return s;
  struct Sum {
    size_t count = 0;
    double seconds = 0;
  };
  std::map<std::string, Sum> by_name;
  double total = 0;
  for (const auto* st : chosen) {
    total += st->seconds;
    s.step_s += st->seconds;
    s.launches += double(st->launches.size());
    for (const auto& l : st->launches) {
      by_name[l.name].count += 1;
      by_name[l.name].seconds += l.seconds;
      s.launches_s += l.seconds;
    }
  }
  s.steps = chosen.size();
  const double n = double(s.steps);
  s.step_s /= n, s.launches_s /= n, s.launches /= n;
  for (const auto& [name, sum] : by_name)
    s.kernels.push_back({name, double(sum.count) / n, sum.seconds / double(sum.count), total > 0 ? sum.seconds / total : 0});
  std::sort(s.kernels.begin(), s.kernels.end(), [](const auto& a, const auto& b) { return a.share > b.share; });
  return s;
}

namespace {

nlohmann::json dim(const dev::Dim3& d) { return {d.x, d.y, d.z}; }

}  // namespace

void write_launch_times(const std::string& path, const RunDevice& d) {
  if (!d.device_backend) return;
  const auto& steps = d.device_backend->timed_steps();
  nlohmann::json j = {{"schema", "qtune-launch-times/1"},
                      {"device", d.device->store_fingerprint().to_json()},
                      {"note", "every launch between two events on the stream, no graph: a step's time exceeds the "
                               "graph's by the events' cost; the kernels' own times are what the static model predicts"},
                      {"steps", nlohmann::json::array()}};
  for (size_t i = 0; i < steps.size(); ++i) {
    nlohmann::json launches = nlohmann::json::array();
    for (const auto& l : steps[i].launches) {
      nlohmann::json row = {{"kernel", l.name}, {"seconds", l.seconds}};
      if (l.call) row["library_call"] = true;
      else row["grid"] = dim(l.cfg.grid), row["block"] = dim(l.cfg.block), row["dynamic_smem"] = l.cfg.dynamic_smem_bytes;
      if (!l.call && l.cfg.cluster.x * l.cfg.cluster.y * l.cfg.cluster.z > 1) row["cluster"] = dim(l.cfg.cluster);
      launches.push_back(row);
    }
    j["steps"].push_back({{"index", i}, {"rows", steps[i].rows}, {"seconds", steps[i].seconds}, {"launches", launches}});
  }
  const LaunchTimeSummary s = summarize_launch_times(steps);
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : s.kernels)
    kernels.push_back({{"kernel", k.name}, {"per_step", k.per_step}, {"mean_s", k.mean_s}, {"share", k.share}});
  j["summary"] = {{"steps", s.steps},       {"decode", s.decode},       {"step_s", s.step_s},
                  {"launches_s", s.launches_s}, {"launches", s.launches}, {"kernels", kernels}};
  j["steps_dropped"] = d.device_backend->timed_steps_dropped();
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (!out) throw Error("--launch-times: cannot write " + path, kExitFailure);

  if (s.steps == 0) {
    std::fprintf(stderr, "qrun: launch times: no step ran\n");
    return;
  }
  std::fprintf(stderr,
               "qrun: launch times of %zu %s (%s): a step %.1f us, its %.0f launches %.1f us, between them %.1f us "
               "(%.2f us a launch, events included)\n",
               s.steps, s.decode ? "decode steps" : "steps", path.c_str(), s.step_s * 1e6,
               s.launches, s.launches_s * 1e6, (s.step_s - s.launches_s) * 1e6,
               s.launches > 0 ? (s.step_s - s.launches_s) / s.launches * 1e6 : 0.0);
  for (size_t i = 0; i < s.kernels.size() && i < 12; ++i)
    std::fprintf(stderr, "qrun:   %5.1f%%  %5.1f x %8.2f us  %s\n", 100 * s.kernels[i].share, s.kernels[i].per_step,
                 s.kernels[i].mean_s * 1e6, s.kernels[i].name.c_str());
  if (s.kernels.size() > 12) std::fprintf(stderr, "qrun:   ... %zu more kernels in the file\n", s.kernels.size() - 12);
}

}  // namespace qt::rt
