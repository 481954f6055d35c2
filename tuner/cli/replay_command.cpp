#include "tuner/cli/commands.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "tuner/replay/replay.h"
#include "tuner/search/strategies.h"

namespace qt::tune {

namespace {

nlohmann::json curve_json(const SweepResult& r) {
  nlohmann::json c = nlohmann::json::array();
  for (const auto& [e, f] : r.curve) c.push_back({e, f});
  return c;
}

Budget parse_budget(const std::string& text, size_t space_size) {
  Budget b;
  if (!text.empty() && text.back() == 's') {
    b.max_seconds = parse_double(text.substr(0, text.size() - 1), "--budget seconds");
    if (!(b.max_seconds > 0)) throw Error("--budget seconds must be positive: " + text);
  } else {
    b.max_evals = parse_eval_budget(text, space_size);
  }
  return b;
}

}  // namespace

int replay_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune replay",
              "Replays a recorded tuning space (Kernel Tuner cache, .json or .json.gz) with a search strategy over "
              "many seeds and reports how close it gets to the recorded optimum, beside random search.");
  cli.option("--space", "FILE", "recorded space (Kernel Tuner cache format)")
      .option("--strategy", "S", "strategy: exhaustive, random, genetic, annealing, ils, bandit, best", "best")
      .option("--budget", "B", "evaluations (200), share of the space (5%) or charged seconds (600s)", "5%")
      .option("--seeds", "N", "independent runs (seeds 1..N)", "50")
      .option("--first-seed", "S", "seed of the first run", "1")
      .option("--curve-points", "N", "points on the efficiency curve", "20")
      .flag("--json", "print one JSON object");
  if (!cli.parse(args)) return 0;
  if (!cli.given("--space")) throw Error("qtune replay needs --space FILE");
  RecordedSpace rs = load_kt_cache(cli.get("--space"));
  SweepOptions opt;
  opt.strategy = cli.get("--strategy");
  make_strategy(opt.strategy);  // reject unknown names before any work
  opt.budget = parse_budget(cli.get("--budget"), rs.space.size());
  opt.seeds = int(cli.get_int("--seeds"));
  if (opt.seeds <= 0 || opt.seeds > 100000) throw Error("--seeds must be in 1..100000");
  opt.first_seed = uint64_t(cli.get_int("--first-seed"));
  opt.curve_points = int(cli.get_int("--curve-points"));
  if (opt.curve_points <= 0 || opt.curve_points > 10000) throw Error("--curve-points must be in 1..10000");
  SweepResult r = sweep(rs, opt);
  SweepOptions ropt = opt;
  ropt.strategy = "random";
  SweepResult rnd = sweep(rs, ropt);

  if (cli.get_flag("--json")) {
    nlohmann::json j;
    j["strategy"] = r.strategy;
    j["requested_strategy"] = opt.strategy;
    j["space"] = cli.get("--space");
    j["device_name"] = rs.device_name;
    j["kernel_name"] = rs.kernel_name;
    j["space_size"] = rs.space.size();
    j["recorded_failures"] = rs.failures;
    j["optimum_ms"] = rs.optimum_ms;
    j["budget_evals"] = opt.budget.max_evals >= 0 ? nlohmann::json(opt.budget.max_evals) : nlohmann::json(nullptr);
    j["budget_seconds"] = opt.budget.max_seconds >= 0 ? nlohmann::json(opt.budget.max_seconds) : nlohmann::json(nullptr);
    j["seeds"] = opt.seeds;
    j["median_fraction_of_optimum"] = r.median_fraction;
    j["p25_fraction_of_optimum"] = r.p25_fraction;
    j["p75_fraction_of_optimum"] = r.p75_fraction;
    j["optimum_hit_rate"] = r.hit_rate;
    j["median_evaluations"] = r.median_evals;
    j["median_charged_seconds"] = r.median_seconds;
    j["curve"] = curve_json(r);
    j["random"] = {{"median_fraction_of_optimum", rnd.median_fraction},
                   {"optimum_hit_rate", rnd.hit_rate},
                   {"median_evaluations", rnd.median_evals},
                   {"curve", curve_json(rnd)}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("space %s: %s on %s, %zu points (%zu recorded failures), optimum %.6g ms\n", cli.get("--space").c_str(),
              rs.kernel_name.c_str(), rs.device_name.c_str(), rs.space.size(), rs.failures, rs.optimum_ms);
  std::printf("budget: %s, %d seeds\n", cli.get("--budget").c_str(), opt.seeds);
  std::printf("%-10s median %.4f  (p25 %.4f, p75 %.4f)  optimum found in %.0f%% of seeds\n", r.strategy.c_str(),
              r.median_fraction, r.p25_fraction, r.p75_fraction, 100 * r.hit_rate);
  std::printf("%-10s median %.4f  (p25 %.4f, p75 %.4f)  optimum found in %.0f%% of seeds\n", "random",
              rnd.median_fraction, rnd.p25_fraction, rnd.p75_fraction, 100 * rnd.hit_rate);
  std::printf("%10s  %10s  %10s\n", "evals", r.strategy.c_str(), "random");
  for (size_t i = 0; i < r.curve.size() && i < rnd.curve.size(); ++i)
    std::printf("%10lld  %10.4f  %10.4f\n", (long long)r.curve[i].first, r.curve[i].second, rnd.curve[i].second);
  return 0;
}

}  // namespace qt::tune
