#include "tuner/static/calibration.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/quantile.h"
#include "device/arch/arch_limits.h"
#include "device/winners/store_schema.h"
#include "device/winners/winners.h"
#include "kernels_src/registry/registry.h"
#include "kernels_src/registry/stored_point.h"
#include "tuner/static/roofline.h"

namespace qt::tune {
namespace {

std::vector<winners::ResultRow> verified_rows(const std::string& path) {
  sqlite3* db = winners::open_store_read_only(path, /*immutable=*/true);
  std::vector<winners::ResultRow> rows;
  try {
    winners::ResultQuery q;
    q.ok_only = true;
    rows = winners::read_results(db, q);
  } catch (const std::exception& e) {
    sqlite3_close(db);
    throw Error(path + ": not a qtune tuning store (" + e.what() + ")", kExitBadInput);
  }
  sqlite3_close(db);
  return rows;
}

// A GPU's architecture (90 for "sm_90"); 0 for the emulator and the CPU, -1 for a GPU this build has no
// figures or compiler target for.
int gpu_arch(const dev::DeviceFingerprint& d) {
  if (d.name == "emu" || d.arch.rfind("sm_", 0) != 0) return 0;
  try {
    return compile::parse_arch(d.arch);
  } catch (const Error&) {
    return -1;
  }
}

// Every dimension in [1, 2^31): the kernels index in 32 bits, and the plans multiply dimensions.
bool dims_in_range(const std::vector<int64_t>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 1 && d < (int64_t(1) << 31); });
}

}  // namespace

int64_t CalibrationPoint::rows() const {
  for (size_t i = 0; i < shape.names.size(); ++i)
    if (shape.names[i] == "M") return shape.values[i];
  return 0;
}

namespace {

// A measured time of one point at one shape on one GPU, before the model prices it.
struct Measured {
  dev::DeviceFingerprint device;
  const kernels::KernelFamily* family = nullptr;
  kernels::Point point;
  kernels::Shape shape;
  double seconds = 0;
  bool current_source = false;
  bool in_chain = false;  // a report's "... in a chain" variant: per launch of many back to back
};

const kernels::KernelFamily* device_family(const std::string& name) {
  for (const kernels::KernelFamily* k : kernels::all_families())
    if (k->name == name) return k->on_host() ? nullptr : k;
  return nullptr;
}

bool wanted(const std::vector<std::string>& families, const std::string& name) {
  return families.empty() || std::find(families.begin(), families.end(), name) != families.end();
}

// A tuning store's verified rows of GPUs.
std::vector<Measured> store_rows(const std::string& path, const std::vector<std::string>& families,
                                 std::map<std::string, size_t>& skipped) {
  std::vector<Measured> out;
  for (const winners::ResultRow& r : verified_rows(path)) {
    if (gpu_arch(r.device) == 0) continue;  // the emulator's and the CPU's rows are no GPU's times
    if (gpu_arch(r.device) < 0) {
      ++skipped["a GPU architecture this build has no figures for (" + r.device.arch + ")"];
      continue;
    }
    const size_t dot = r.family.find('.');
    const std::string name = dot == std::string::npos ? r.family : r.family.substr(dot + 1);
    if (!wanted(families, name)) continue;
    const kernels::KernelFamily* f = device_family(name);
    if (!f) {
      ++skipped["not a device family of this build (a cuBLASLt baseline, or renamed)"];
      continue;
    }
    const std::optional<kernels::Point> p = kernels::point_from_json(*f, r.point);
    if (!p) {
      ++skipped["point outside today's space"];
      continue;
    }
    if (r.shape.size() != f->dims.size() || !dims_in_range(r.shape) || !(r.stats.median > 0)) {
      ++skipped[r.shape.size() != f->dims.size() ? "shape of another arity than today's"
                : !dims_in_range(r.shape)        ? "a shape dimension outside [1, 2^31)"
                                                 : "no median time"];
      continue;
    }
    out.push_back({r.device, f, *p, f->shape(r.shape), r.stats.median, r.source_hash == f->source_hash});
  }
  return out;
}

// The kernel rows of a `qbench --report` JSON (report.json): each variant whose detail names one family's
// point ("awq_frag_gemv bk=64,pf=2,... (default)") at the row's dimensions. A report keeps no source hash, so
// its rows count as measured on an earlier source. A point timed twice in one row (tuned and default alike)
// counts once.
std::vector<Measured> report_rows(const std::string& path, const nlohmann::json& report,
                                  const std::vector<std::string>& families, std::map<std::string, size_t>& skipped) {
  std::vector<Measured> out;
  dev::DeviceFingerprint device;
  try {
    device = dev::DeviceFingerprint::from_json(nlohmann::json::parse(report.at("device").at("fingerprint").get<std::string>()));
  } catch (const std::exception& e) {
    throw Error(path + ": a qbench report without its device's fingerprint (" + e.what() + ")", kExitBadInput);
  }
  if (gpu_arch(device) == 0) return out;
  if (gpu_arch(device) < 0)
    throw Error(path + ": measured on " + device.arch + ", an architecture this build has no figures for", kExitBadInput);
  auto malformed = [&path](const std::string& where, const char* want) {
    return Error(path + ": " + where + " is not " + want + " (a qbench report's kernel rows)", kExitBadInput);
  };
  std::set<std::string> seen;
  for (const std::string section : {"kernels", "moe_grouped"}) {
    if (!report.contains(section)) continue;
    const nlohmann::json& holder = report[section];
    if (section == "moe_grouped" && (!holder.is_object() || !holder.contains("rows")))
      throw malformed("\"moe_grouped\"", "an object with \"rows\"");
    const nlohmann::json& rows = section == "moe_grouped" ? holder["rows"] : holder;
    if (!rows.is_array()) throw malformed("\"" + section + "\" rows", "an array");
    for (size_t i = 0; i < rows.size(); ++i) {
      const nlohmann::json& row = rows[i];
      const std::string where = "\"" + section + "\" row " + std::to_string(i);
      if (!row.is_object()) throw malformed(where, "an object");
      const nlohmann::json variants = row.value("variants", nlohmann::json::array());
      if (!variants.is_array()) throw malformed(where + "'s \"variants\"", "an array");
      for (const nlohmann::json& v : variants) {
        if (!v.is_object()) throw malformed(where + "'s variant", "an object");
        if (v.contains("detail") && !v["detail"].is_string()) throw malformed(where + "'s \"detail\"", "a string");
        const bool in_chain =
            v.contains("name") && v["name"].is_string() && v["name"].get<std::string>().ends_with(" in a chain");
        const std::string detail = v.value("detail", "");
        const size_t space = detail.find(' '), paren = detail.rfind(" (");
        if (space == std::string::npos || paren == std::string::npos || paren <= space || !v.contains("seconds")) continue;
        const std::string name = detail.substr(0, space), point_text = detail.substr(space + 1, paren - space - 1);
        // One family's point is name=value items; "awq_frag_dequant + cuBLASLt ..." is a composite baseline.
        if (point_text.find(' ') != std::string::npos) continue;
        if (!wanted(families, name)) continue;
        const kernels::KernelFamily* f = device_family(name);
        if (!f) continue;  // a baseline's row (cuBLASLt, dequant + cuBLASLt, experts one by one)
        // A recorded point: a parameter added since takes the value it ran (absent_value), not today's default.
        const std::optional<kernels::Point> recorded = kernels::point_from_text(*f, point_text);
        if (!recorded) {
          ++skipped["point outside today's space"];
          continue;
        }
        const kernels::Point p = *recorded;
        std::vector<int64_t> dims;
        for (const std::string& d : f->dims)
          if (row.contains(d) && row[d].is_number_integer()) dims.push_back(row[d].get<int64_t>());
        const double seconds = v["seconds"].is_number() ? v["seconds"].get<double>() : 0.0;
        if (dims.size() != f->dims.size() || !dims_in_range(dims) || !(seconds > 0)) {
          ++skipped[dims.size() != f->dims.size() ? "report row without the family's dimensions"
                    : !dims_in_range(dims)        ? "a shape dimension outside [1, 2^31)"
                                                  : "no time"];
          continue;
        }
        const kernels::Shape shape = f->shape(dims);
        if (!seen.insert(name + " " + kernels::shape_key(shape) + " " + kernels::point_key(p) + (in_chain ? " chain" : ""))
                 .second)
          continue;
        out.push_back({device, f, p, shape, seconds, false, in_chain});
      }
    }
  }
  return out;
}

}  // namespace

Calibration calibrate_store(const std::string& path, const std::vector<std::string>& families,
                            compile::CompileService& service) {
  Calibration out;
  std::vector<Measured> measured;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read", kExitBadInput);
  char head[16] = {};
  in.read(head, sizeof head);
  if (std::string(head, size_t(in.gcount())).rfind("SQLite format 3", 0) == 0) {
    measured = store_rows(path, families, out.skipped);
  } else {
    in.clear();
    in.seekg(0);
    nlohmann::json report;
    try {
      report = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw Error(path + ": neither a tuning store nor a qbench report (" + e.what() + ")", kExitBadInput);
    }
    if (!report.is_object() || !report.contains("schema") || !report["schema"].is_string() ||
        report["schema"].get<std::string>().rfind("qtune-bench-report/", 0) != 0)
      throw Error(path + ": neither a tuning store nor a qbench report (no \"schema\": \"qtune-bench-report/...\")",
                  kExitBadInput);
    measured = report_rows(path, report, families, out.skipped);
  }
  // Rows grouped by (family, architecture), so each family's points compile as one batch.
  std::map<std::pair<std::string, int>, std::vector<const Measured*>> groups;
  for (const Measured& m : measured) groups[{m.family->name, gpu_arch(m.device)}].push_back(&m);
  for (const auto& [key, pending] : groups) {
    const kernels::KernelFamily& f = kernels::find_family(key.first);
    if (key.second < f.min_sm) {
      out.skipped["architecture below the family's"] += pending.size();
      continue;
    }
    std::vector<kernels::Point> unique;
    std::vector<const Measured*> runnable;
    for (const Measured* p : pending) {
      if (!kernels::point_runs(f, p->point, p->shape).empty()) {
        ++out.skipped["a point today's family does not run at its shape"];
        continue;
      }
      runnable.push_back(p);
      if (std::find(unique.begin(), unique.end(), p->point) == unique.end()) unique.push_back(p->point);
    }
    const std::vector<compile::PointResult> compiled = service.compile(f, unique, key.second);
    for (const Measured* p : runnable) {
      const auto& c = compiled[size_t(std::find(unique.begin(), unique.end(), p->point) - unique.begin())];
      if (!c.ok()) {
        ++out.skipped["does not compile today"];
        continue;
      }
      const std::vector<KernelResources> resources = model_resources(c.kernels);
      try {
        const GpuPeaks peak = gpu_peaks(p->device);
        const RooflineEstimate e = estimate_point(f, p->point, p->shape, key.second, peak, resources);
        // In a chain each launch costs what it costs inside a step (the step model's stream_launch_us), not what
        // events around it alone see (launch_us).
        const double model_s = p->in_chain ? e.seconds - e.launch_s + e.launch_s * peak.stream_launch_us / peak.launch_us
                                           : e.seconds;
        out.points.push_back(
            {p->device.name, f.name, p->shape, p->point, p->seconds, model_s, e.bound, p->current_source, p->in_chain});
      } catch (const std::exception& e) {
        ++out.skipped[std::string("the model cannot place it: ") + e.what()];
      }
    }
  }
  std::sort(out.points.begin(), out.points.end(), [](const CalibrationPoint& a, const CalibrationPoint& b) {
    return std::tie(a.device, a.family, a.shape.values, a.measured_s) < std::tie(b.device, b.family, b.shape.values, b.measured_s);
  });
  return out;
}

CalibrationFit fit(const std::vector<const CalibrationPoint*>& points) {
  CalibrationFit f;
  f.n = points.size();
  std::vector<double> model, measured, errors, ratios;
  for (const CalibrationPoint* p : points) {
    model.push_back(p->model_s), measured.push_back(p->measured_s);
    errors.push_back(std::fabs(p->model_s - p->measured_s) / p->measured_s);
    ratios.push_back(p->model_s / p->measured_s);
  }
  f.spearman = spearman(model, measured);
  f.median_error = f.n ? median(errors) : std::nan("");
  f.median_ratio = f.n ? median(ratios) : std::nan("");
  return f;
}

}  // namespace qt::tune
