#include "tuner/static/against_command.h"

#include <cmath>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/number_format.h"
#include "kernels_src/registry/registry.h"
#include "tuner/static/calibration.h"
#include "tuner/static/text_table.h"

namespace qt::tune {
namespace {

std::string fixed(const char* fmt, double v) { return std::isfinite(v) ? format_number(fmt, v) : "-"; }

// A row's family, and for a report's chained rows (timed per launch back to back) a group of their own: the
// model prices their launches differently.
std::string group_name(const CalibrationPoint& p) { return p.family + (p.in_chain ? " in a chain" : ""); }

nlohmann::json fit_json(const CalibrationFit& f) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"points", f.n}, {"spearman", num(f.spearman)}, {"median_error", num(f.median_error)},
          {"median_model_over_measured", num(f.median_ratio)}};
}

}  // namespace

void declare_against_flag(CliArgs& cli) {
  cli.option("--against", "STORE",
             "compare the static model with what a GPU measured: every verified row of this tuning store, or every "
             "kernel row of this qbench --report JSON; each row's measured and predicted time, and per family the rank "
             "correlation and the median error");
}

int run_against(const CliArgs& cli) {
  for (const char* flag : {"--gpu", "--points", "--m", "--model", "--step"})
    if (cli.given(flag))
      throw Error(std::string(flag) + " does not apply to --against: the store's rows give the GPU, the points and the shapes");
  const std::string path = cli.get("--against");
  std::vector<std::string> families;
  if (auto k = cli.get_optional("--kernel")) families.push_back(kernels::find_family(*k).name);
  compile::ServiceOptions opt;
  opt.cache_dir = cli.get_optional("--cache-dir").value_or("");
  opt.use_cache = !cli.get_flag("--no-cache");
  opt.threads = cli.get_int_as<int>("--threads");
  compile::CompileService service(opt);
  const Calibration c = calibrate_store(path, families, service);

  std::cout << "The static model (PREDICTIONS, roofline.h) against " << c.points.size() << " GPU rows measured in "
            << path << ", each predicted with its GPU's fingerprint and today's registers\n\n";
  TextTable rows{{"device", "family", "shape", "point", "measured us", "model us", "model/measured", "bound"}, {}};
  bool earlier_source = false;
  for (const CalibrationPoint& p : c.points) {
    earlier_source = earlier_source || !p.current_source;
    rows.rows.push_back({p.device, group_name(p) + (p.current_source ? "" : " *"), kernels::shape_key(p.shape),
                    kernels::point_key(p.point), format_number("%.2f", p.measured_s * 1e6),
                    format_number("%.2f", p.model_s * 1e6), format_number("%.2f", p.model_s / p.measured_s), p.bound});
  }
  if (!c.points.empty()) rows.print(std::cout);
  if (earlier_source)
    std::cout << "* not measured on today's source of the family (a report's rows keep no source hash): the model "
                 "describes today's kernel\n";

  // Per device and family; families with rows both at M <= 16 and above also split there (decode against
  // prefill, which the model prices on different terms).
  std::map<std::pair<std::string, std::string>, std::vector<const CalibrationPoint*>> groups;
  for (const CalibrationPoint& p : c.points) groups[{p.device, group_name(p)}].push_back(&p);
  TextTable summary{{"device", "family", "rows", "points", "Spearman", "median error", "median model/measured"}, {}};
  nlohmann::json fits = nlohmann::json::array();
  auto add = [&](const std::string& device, const std::string& family, const std::string& which,
                 const std::vector<const CalibrationPoint*>& pts) {
    if (pts.empty()) return;
    const CalibrationFit f = fit(pts);
    summary.rows.push_back({device, family, which, std::to_string(f.n), fixed("%.3f", f.spearman),
                       fixed("%.1f%%", 100 * f.median_error), fixed("%.2f", f.median_ratio)});
    nlohmann::json j = fit_json(f);
    j["device"] = device, j["family"] = family, j["rows"] = which;
    fits.push_back(j);
  };
  std::vector<const CalibrationPoint*> all;
  for (const auto& [key, pts] : groups) {
    all.insert(all.end(), pts.begin(), pts.end());
    add(key.first, key.second, "all", pts);
    std::vector<const CalibrationPoint*> decode, larger;
    for (const CalibrationPoint* p : pts) (p->rows() > 16 ? larger : p->rows() > 0 ? decode : larger).push_back(p);
    if (!decode.empty() && !larger.empty()) add(key.first, key.second, "M <= 16", decode), add(key.first, key.second, "M > 16", larger);
  }
  if (groups.size() > 1) add("", "every family", "all", all);
  std::cout << "\n";
  if (c.points.empty()) std::cout << "no measured GPU row of a device family the model can place\n";
  else summary.print(std::cout);
  for (const auto& [why, n] : c.skipped) std::cout << "skipped " << n << " measured row" << (n == 1 ? "" : "s") << ": " << why << "\n";

  if (auto out = cli.get_optional("--json")) {
    nlohmann::json j = {{"store", path}, {"fits", fits}, {"rows", nlohmann::json::array()}, {"skipped", c.skipped}};
    for (const CalibrationPoint& p : c.points)
      j["rows"].push_back({{"device", p.device}, {"family", p.family}, {"shape", kernels::shape_key(p.shape)},
                           {"point", p.point}, {"measured_s", p.measured_s}, {"model_s", p.model_s},
                           {"bound", p.bound}, {"current_source", p.current_source}, {"in_chain", p.in_chain}});
    std::ofstream f(*out);
    f << j.dump(1) << "\n";
    if (!f) throw Error("cannot write " + *out, kExitFailure);
  }
  return kExitOk;
}

}  // namespace qt::tune
