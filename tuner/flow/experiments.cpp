#include "tuner/flow/experiments.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/error.h"
#include "common/result_status.h"
#include "kernels_src/registry/family.h"
#include "tuner/family/blas_baselines.h"

namespace qt::tune {
namespace {

std::string dims_text(const kernels::KernelFamily& f) {
  std::string s;
  for (const std::string& d : f.dims) s += (s.empty() ? "" : ", ") + d;
  return s;
}

// {"M": 1, "N": 4096, ...} in the family's order of dimensions, every one given, none other.
std::vector<int64_t> shape_values(const kernels::KernelFamily& f, const nlohmann::json& shape, const std::string& where) {
  if (!shape.is_object()) throw Error(where + ": \"shape\" must be an object of " + f.name + "'s dimensions (" + dims_text(f) + ")");
  std::vector<int64_t> values;
  for (const std::string& d : f.dims) {
    if (!shape.contains(d)) throw Error(where + ": the shape has no " + d + " (" + f.name + " takes " + dims_text(f) + ")");
    if (!shape[d].is_number_integer() || shape[d].get<int64_t>() <= 0)
      throw Error(where + ": shape " + d + " must be a positive integer, not " + shape[d].dump());
    values.push_back(shape[d].get<int64_t>());
  }
  for (const auto& [name, v] : shape.items())
    if (std::find(f.dims.begin(), f.dims.end(), name) == f.dims.end())
      throw Error(where + ": " + f.name + " has no dimension " + name + " (it takes " + dims_text(f) + ")");
  return values;
}

// Why `p` is no point of the family's space at `shape`: a value outside a parameter's list, or the family's own
// refusal. Empty when it is one.
std::string refusal(const kernels::KernelFamily& f, const kernels::Point& p, const kernels::Shape& shape) {
  for (const kernels::Param& prm : f.params) {
    auto it = p.find(prm.name);
    if (it == p.end()) return "it gives no " + prm.name;
    if (std::find(prm.values.begin(), prm.values.end(), it->second) == prm.values.end()) {
      std::string values;
      for (int64_t v : prm.values) values += (values.empty() ? "" : ", ") + kernels::value_text(prm, v);
      return prm.name + "=" + kernels::value_text(prm, it->second) + " is not in its values (" + values + ")";
    }
  }
  return kernels::point_runs(f, p, shape);
}

// One experiment's job at one shape: its points, each the shape's untuned default with the listed changes.
GpuJob plan_one(const std::shared_ptr<Tunable>& fam, const nlohmann::json& shape_json, const nlohmann::json& points,
                const std::string& why, const std::string& where_experiment) {
  const kernels::KernelFamily& f = fam->family();
  const std::string& name = f.name;
  GpuJob job;
  job.family = fam;
  job.shape = shape_values(f, shape_json, where_experiment);
  job.batched = !f.dims.empty() && f.dims[0] == "M";
  job.why = why;
  const kernels::Shape shape = f.shape(job.shape);
  const std::string where = where_experiment + " at " + kernels::shape_key(shape);
  // The default the runtime would run here: the first default point that accepts the shape.
  kernels::Point base;
  for (const kernels::Point& d : f.default_points(shape))
    if (refusal(f, d, shape).empty()) {
      base = d;
      break;
    }
  for (const nlohmann::json& change : points) {
    if (!change.is_object()) throw Error(where + ": a point is an object of parameters, not " + change.dump());
    kernels::Point p = base;
    std::string text;
    for (const auto& [param, v] : change.items()) {
      auto prm = std::find_if(f.params.begin(), f.params.end(), [&](const kernels::Param& q) { return q.name == param; });
      if (prm == f.params.end()) {
        std::string known;
        for (const kernels::Param& q : f.params) known += (known.empty() ? "" : ", ") + q.name;
        throw Error(where + ": " + name + " has no parameter " + param + " (" + known + ")");
      }
      std::optional<int64_t> value;
      if (v.is_number_integer()) value = v.get<int64_t>();
      else if (v.is_string()) value = kernels::label_value(*prm, v.get<std::string>());
      if (!value) throw Error(where + ": " + param + "=" + v.dump() + " is not a value of " + name);
      p[param] = *value;
      text += (text.empty() ? "" : ",") + param + "=" + kernels::value_text(*prm, *value);
    }
    if (std::string why_not = refusal(f, p, shape); !why_not.empty()) {
      if (base.empty() && why_not.rfind("it gives no ", 0) == 0)
        throw Error(where + ": no default point of " + name + " runs this shape, so each point gives every parameter; " +
                    change.dump() + " " + why_not.substr(3));
      throw Error(where + ": point " + change.dump() + " cannot run it: " + why_not);
    }
    if (std::find(job.listed.begin(), job.listed.end(), p) != job.listed.end())
      throw Error(where + ": point " + change.dump() + " is listed twice (as " + kernels::point_key(p) + ")");
    job.listed.push_back(p);
    job.listed_text.push_back(text.empty() ? "default" : text);
  }
  job.budget = int64_t(job.listed.size());
  return job;
}

}  // namespace

std::vector<GpuJob> plan_experiment_jobs(const nlohmann::json& doc, const std::string& device, int target_sm) {
  if (!doc.is_object() || !doc.contains("experiments") || !doc["experiments"].is_array())
    throw Error("an experiments file is {\"about\"?, \"experiments\": [{\"why\", \"family\", \"shape\" or \"shapes\", "
                "\"points\"}, ...]}");
  for (const auto& [key, v] : doc.items())
    if (key != "about" && key != "experiments") throw Error("unknown top-level field \"" + key + "\" (about, experiments)");
  std::vector<GpuJob> jobs;
  size_t index = 0;
  for (const nlohmann::json& e : doc["experiments"]) {
    ++index;
    std::string where = "experiment " + std::to_string(index);
    if (!e.is_object()) throw Error(where + " is not an object");
    for (const auto& [key, v] : e.items())
      if (key != "why" && key != "family" && key != "shape" && key != "shapes" && key != "points")
        throw Error(where + ": unknown field \"" + key + "\" (why, family, shape or shapes, points)");
    if (!e.contains("why") || !e["why"].is_string() || e["why"].get<std::string>().empty())
      throw Error(where + ": \"why\" must say what the experiment settles");
    const std::string why = e["why"].get<std::string>();
    where += " (" + why.substr(0, 60) + ")";
    if (!e.contains("family") || !e["family"].is_string()) throw Error(where + ": \"family\" must name a kernel family");
    const std::string name = e["family"].get<std::string>();
    if (find_blas_baseline(name)) throw Error(where + ": " + name + " is a cuBLASLt baseline, which has no points to list");
    std::shared_ptr<Tunable> fam;
    try {
      fam = find_family(device + "." + name, target_sm);
    } catch (const Error& err) {
      throw Error(where + ": " + err.what());
    }
    const kernels::KernelFamily& f = fam->family();
    if (target_sm > 0 && f.min_sm > target_sm)
      throw Error(where + ": " + name + " needs sm_" + std::to_string(f.min_sm) + ", not sm_" + std::to_string(target_sm));
    if (e.contains("shape") == e.contains("shapes"))
      throw Error(where + ": give \"shape\" (one) or \"shapes\" (a list), not " + (e.contains("shape") ? "both" : "neither"));
    const nlohmann::json shapes = e.contains("shape") ? nlohmann::json::array({e["shape"]}) : e["shapes"];
    if (!shapes.is_array() || shapes.empty()) throw Error(where + ": \"shapes\" must list at least one shape");
    if (!e.contains("points") || !e["points"].is_array() || e["points"].empty())
      throw Error(where + ": \"points\" must list at least one point ({} is the default)");
    for (const nlohmann::json& shape_json : shapes) jobs.push_back(plan_one(fam, shape_json, e["points"], why, where));
  }
  if (jobs.empty()) throw Error("the experiments file lists no experiment");
  return jobs;
}

std::vector<GpuJob> read_experiment_jobs(const std::string& path, const std::string& device, int target_sm) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the experiments file");
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded()) throw Error(path + ": not valid JSON");
  try {
    return plan_experiment_jobs(doc, device, target_sm);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

std::vector<std::string> experiment_lines(const std::vector<GpuJob>& jobs, const Store& store,
                                          const winners::DeviceFingerprint& device, bool timed) {
  std::vector<std::string> lines;
  std::string last_why;
  for (const GpuJob& job : jobs) {
    if (job.why != last_why) lines.push_back("experiment: " + job.why);
    last_why = job.why;
    const std::map<std::string, CandidateOutcome> got = recorded_outcomes(store, device, *job.family, job.shape);
    for (size_t i = 0; i < job.listed.size(); ++i) {
      std::string result = "not measured";
      for (const auto& [text, o] : got)
        if (job.family->to_point(nlohmann::json::parse(text)) == job.listed[i]) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.2f us", o.stats.median * 1e6);
          result = o.status == Status::Ok ? (timed ? buf : "verified")
                                          : std::string(status_name(o.status)) + (o.detail.empty() ? "" : ": " + o.detail.substr(0, 80));
        }
      char line[512];
      std::snprintf(line, sizeof line, "  %-28s %-20s %-34s %s", job.family->family().name.c_str(),
                    shape_text(job.shape).c_str(), job.listed_text[i].c_str(), result.c_str());
      lines.push_back(line);
    }
  }
  return lines;
}

}  // namespace qt::tune
