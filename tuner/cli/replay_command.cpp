#include "tuner/cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/flag_ranges.h"
#include "tuner/replay/loo.h"
#include "tuner/replay/replay.h"
#include "tuner/replay/transfer.h"
#include "tuner/search/strategies.h"

namespace qt::tune {

namespace {

// As common's parse_int_list: an empty item ("10,,20") is a mistake, not nothing.
std::vector<std::string> split_list(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma == start) throw Error(what + ": empty item in list '" + text + "'");
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Recorded spaces from --space (a list of files) and --spaces (a folder: every .json and .json.gz in it).
std::vector<std::string> space_files(const CliArgs& cli) {
  std::vector<std::string> files;
  if (cli.given("--space")) files = split_list(cli.get("--space"), "--space");
  if (cli.given("--spaces")) {
    const std::string dir = cli.get("--spaces");
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.ends_with(".json") || n.ends_with(".json.gz")) found.push_back(e.path().string());
    }
    if (ec) throw Error(dir + ": cannot list the folder (" + ec.message() + ")");
    if (found.empty()) throw Error(dir + ": no .json or .json.gz recorded space in the folder");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw Error("qtune replay needs --space FILE[,FILE...] or --spaces DIR");
  return files;
}

std::string space_name(const std::string& path) {
  std::string n = std::filesystem::path(path).filename().string();
  for (const char* ext : {".json.gz", ".json"})
    if (n.ends_with(ext)) return n.substr(0, n.size() - std::string(ext).size());
  return n;
}

nlohmann::json curve_json(const SweepResult& r) {
  nlohmann::json c = nlohmann::json::array();
  for (const CurvePoint& p : r.curve) c.push_back({p.at, p.median, p.p25, p.p10});
  return c;
}

nlohmann::json summary_json(const SweepResult& r) {
  return {{"strategy", r.strategy},
          {"median_fraction_of_optimum", r.median_fraction},
          {"p25_fraction_of_optimum", r.p25_fraction},
          {"p10_fraction_of_optimum", r.p10_fraction},
          {"p75_fraction_of_optimum", r.p75_fraction},
          {"optimum_hit_rate", r.hit_rate},
          {"median_evaluations", r.median_evals},
          {"median_charged_seconds", r.median_seconds},
          {"curve_unit", r.curve_in_seconds ? "seconds" : "evaluations"},
          {"curve", curve_json(r)}};
}

void print_line(const char* label, const SweepResult& r) {
  std::printf("%-10s median %.4f  (p10 %.4f, p25 %.4f, p75 %.4f)  optimum found in %.0f%% of seeds\n", label,
              r.median_fraction, r.p10_fraction, r.p25_fraction, r.p75_fraction, 100 * r.hit_rate);
}

int leave_one_out_command(const CliArgs& cli, const std::vector<std::string>& files) {
  std::vector<RecordedSpace> loaded;
  loaded.reserve(files.size());
  for (const auto& f : files) loaded.push_back(load_kt_cache(f));
  std::vector<NamedSpace> spaces;
  for (size_t i = 0; i < files.size(); ++i) spaces.push_back({space_name(files[i]), &loaded[i]});
  LooOptions opt;
  opt.strategies = split_list(cli.get("--strategies"), "--strategies");
  for (const auto& s : opt.strategies) {
    if (s == "best" || s == "exhaustive") throw Error("--strategies: '" + s + "' cannot be a candidate for best");
    make_strategy(s);
  }
  opt.budgets = split_list(cli.get("--budget"), "--budget");
  for (const auto& b : opt.budgets) parse_budget(b, 100);  // reject bad budgets before any work
  opt.seeds = cli.get_int_as<int>("--seeds");
  opt.first_seed = cli.get_int_as<uint64_t>("--first-seed");
  opt.curve_points = cli.get_int_as<int>("--curve-points");
  const bool json = cli.get_flag("--json");
  // Progress on a terminal only: scripts read stdout and stderr together.
  std::function<void(const std::string&)> progress;
  if (isatty(2)) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  LooReport rep = leave_one_out(spaces, opt, progress);
  if (json) {
    nlohmann::json j;
    j["mode"] = "leave-one-out";
    j["selection"] = "highest mean over the other spaces and the budgets of the 25th percentile";
    j["strategies"] = rep.strategies;
    j["budgets"] = rep.budgets;
    j["seeds"] = opt.seeds;
    j["chosen_on_all_spaces"] = rep.strategies[rep.chosen_on_all];
    j["spaces"] = nlohmann::json::array();
    for (size_t s = 0; s < rep.spaces.size(); ++s) {
      nlohmann::json sj = {{"name", rep.spaces[s]},
                           {"file", files[s]},
                           {"device_name", loaded[s].device_name},
                           {"kernel_name", loaded[s].kernel_name},
                           {"space_size", loaded[s].space.size()},
                           {"recorded_failures", loaded[s].failures},
                           {"optimum_ms", loaded[s].optimum_ms},
                           {"chosen_on_others", rep.strategies[rep.chosen[s]]}};
      nlohmann::json by = nlohmann::json::object();
      for (size_t k = 0; k < rep.strategies.size(); ++k) {
        nlohmann::json per = nlohmann::json::object();
        for (size_t b = 0; b < rep.budgets.size(); ++b) {
          nlohmann::json r = summary_json(rep.results[k][s][b]);
          Budget bud = parse_budget(rep.budgets[b], loaded[s].space.size());
          r["budget_evals"] = bud.max_evals >= 0 ? nlohmann::json(bud.max_evals) : nlohmann::json(nullptr);
          r["budget_seconds"] = bud.max_seconds >= 0 ? nlohmann::json(bud.max_seconds) : nlohmann::json(nullptr);
          per[rep.budgets[b]] = r;
        }
        by[rep.strategies[k]] = per;
      }
      sj["results"] = by;
      j["spaces"].push_back(sj);
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("leave-one-out over %zu spaces, %d seeds; selection: mean p25 over the other spaces and budgets\n",
              rep.spaces.size(), opt.seeds);
  for (size_t s = 0; s < rep.spaces.size(); ++s) {
    const size_t k = rep.chosen[s];
    std::printf("%-28s chosen on the others: %-10s", rep.spaces[s].c_str(), rep.strategies[k].c_str());
    for (size_t b = 0; b < rep.budgets.size(); ++b)
      std::printf("  %s: %.3f (p25 %.3f, p10 %.3f)", rep.budgets[b].c_str(), rep.results[k][s][b].median_fraction,
                  rep.results[k][s][b].p25_fraction, rep.results[k][s][b].p10_fraction);
    std::printf("\n");
  }
  std::printf("chosen with every space in hand: %s\n", rep.strategies[rep.chosen_on_all].c_str());
  return 0;
}

}  // namespace

int replay_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune replay",
              "Replays recorded tuning spaces (Kernel Tuner cache, .json or .json.gz) with a search strategy over "
              "many seeds and reports how close it gets to the recorded optimum (median, 25th and 10th "
              "percentiles, curve), beside random search. With --leave-one-out, chooses the strategy for each "
              "space on the other spaces and scores it on the one left out.");
  cli.option("--space", "FILE[,FILE]", "recorded space(s) (Kernel Tuner cache format)")
      .option("--spaces", "DIR", "every recorded space (.json, .json.gz) in a folder")
      .option("--strategy", "S", "strategy: " + [] {
        std::string k;
        for (const auto& n : strategy_names()) k += n + ", ";
        return k + "best";
      }(), "best")
      .option("--budget", "B[,B]", "evaluations (200), share of the space (5%) or charged seconds (600s); a list "
              "gives one result per budget", "5%")
      .option("--seeds", "N", "independent runs (seeds first..first+N-1)", "50").range(flag_ranges::kRepetitions)
      .option("--first-seed", "S", "seed of the first run", "1").range(flag_ranges::kSeed)
      .option("--curve-points", "N", "points on the efficiency curve", "20").range(flag_ranges::kCurvePoints)
      .option("--transfer", "FILE", "another device's recording of the same kernel, known before the search: its "
              "fastest points are tried first and the search builds on them; reports what copying its winner gives")
      .flag("--leave-one-out", "choose among --strategies on all spaces but one, score on that one, for each")
      .option("--strategies", "S,S", "candidates for --leave-one-out", "genetic,annealing,ils,bandit,forest,random")
      .flag("--json", "print one JSON object (an array of them for a list of budgets)");
  if (!cli.parse(args)) return 0;
  const std::vector<std::string> files = space_files(cli);
  const int seeds = cli.get_int_as<int>("--seeds");
  const int curve_points = cli.get_int_as<int>("--curve-points");
  if (cli.get_flag("--leave-one-out")) {
    if (cli.given("--transfer")) throw Error("--transfer and --leave-one-out cannot be combined");
    return leave_one_out_command(cli, files);
  }
  if (files.size() != 1) throw Error("more than one recorded space needs --leave-one-out");
  RecordedSpace rs = load_kt_cache(files[0]);
  SweepOptions opt;
  opt.strategy = cli.get("--strategy");
  make_strategy(opt.strategy);  // reject unknown names before any work
  const std::vector<std::string> budgets = split_list(cli.get("--budget"), "--budget");
  if (budgets.empty()) throw Error("--budget: no budget given");
  std::vector<Budget> parsed;
  for (const auto& b : budgets) parsed.push_back(parse_budget(b, rs.space.size()));
  opt.seeds = seeds;
  opt.first_seed = cli.get_int_as<uint64_t>("--first-seed");
  opt.curve_points = curve_points;
  Knowledge prior;
  double copied = -1;
  if (cli.given("--transfer")) {
    RecordedSpace src = load_kt_cache(cli.get("--transfer"));
    prior = prior_from_recording(rs, src, cli.get("--transfer"));
    copied = copied_winner_fraction(rs, prior);
    opt.known = &prior;
  }
  const bool json = cli.get_flag("--json");
  nlohmann::json all = nlohmann::json::array();
  if (!json) {
    std::printf("space %s: %s on %s, %zu points (%zu recorded failures), optimum %.6g ms\n", files[0].c_str(),
                rs.kernel_name.c_str(), rs.device_name.c_str(), rs.space.size(), rs.failures, rs.optimum_ms);
    if (copied >= 0)
      std::printf("transfer from %s: its winner gives %.4f of the optimum before any evaluation\n",
                  cli.get("--transfer").c_str(), copied);
  }
  for (size_t b = 0; b < budgets.size(); ++b) {
    opt.budget = parsed[b];
    SweepResult r = sweep(rs, opt);
    SweepOptions ropt = opt;
    ropt.strategy = "random";
    ropt.known = nullptr;
    SweepResult rnd = sweep(rs, ropt);
    if (json) {
      nlohmann::json j = summary_json(r);
      j["requested_strategy"] = opt.strategy;
      j["space"] = files[0];
      j["device_name"] = rs.device_name;
      j["kernel_name"] = rs.kernel_name;
      j["space_size"] = rs.space.size();
      j["recorded_failures"] = rs.failures;
      j["optimum_ms"] = rs.optimum_ms;
      j["budget"] = budgets[b];
      j["budget_evals"] = opt.budget.max_evals >= 0 ? nlohmann::json(opt.budget.max_evals) : nlohmann::json(nullptr);
      j["budget_seconds"] =
          opt.budget.max_seconds >= 0 ? nlohmann::json(opt.budget.max_seconds) : nlohmann::json(nullptr);
      j["seeds"] = opt.seeds;
      if (copied >= 0) {
        j["transfer_from"] = cli.get("--transfer");
        j["copied_winner_fraction"] = copied;
      }
      j["random"] = summary_json(rnd);
      all.push_back(j);
      continue;
    }
    std::printf("budget: %s, %d seeds\n", budgets[b].c_str(), opt.seeds);
    print_line(r.strategy.c_str(), r);
    print_line("random", rnd);
    std::printf("%10s  %10s  %10s\n", r.curve_in_seconds ? "seconds" : "evals", r.strategy.c_str(), "random");
    for (size_t i = 0; i < r.curve.size() && i < rnd.curve.size(); ++i)
      std::printf("%10.6g  %10.4f  %10.4f\n", r.curve[i].at, r.curve[i].median, rnd.curve[i].median);
  }
  if (json) std::printf("%s\n", (all.size() == 1 ? all[0] : all).dump().c_str());
  return 0;
}

}  // namespace qt::tune
