#include "tuner/replay/replay.h"

#include <algorithm>
#include <cmath>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/quantile.h"
#include "tuner/search/seeded.h"
#include "tuner/search/strategies.h"

namespace qt::tune {

Observation ReplayObjective::evaluate(PointId id) {
  const RecordedPoint& p = rs_->points.at(id);
  Observation o;
  o.status = p.status;
  o.time = p.time_ms;
  o.cost_s = (p.compile_ms + p.verification_ms + p.benchmark_ms) / 1000.0;
  o.detail = p.failure;
  return o;
}

int64_t parse_eval_budget(const std::string& text, size_t space_size) {
  if (text.empty()) throw Error("empty --budget");
  if (text.back() == '%') {
    double pct = parse_double(text.substr(0, text.size() - 1), "--budget percentage");
    if (!(pct > 0 && pct <= 100)) throw Error("--budget percentage must be in (0, 100]: " + text);
    // Rounded down: "within 5% of the space" must not evaluate 557 of 11130 points (5% = 556.5). The small
    // slack keeps 5% of 400 at 20 when the product lands just below it in binary.
    return std::max<int64_t>(1, int64_t(std::floor(pct / 100.0 * double(space_size) + 1e-9)));
  }
  int64_t n = parse_int(text, "--budget");
  if (n <= 0) throw Error("--budget must be positive: " + text);
  return n;
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

SweepResult sweep(const RecordedSpace& rs, const SweepOptions& opt) {
  if (opt.seeds <= 0) throw Error("--seeds must be positive");
  SweepResult out;
  out.strategy = opt.strategy == "best" ? default_strategy_name() : opt.strategy;
  std::vector<SearchResult> runs;
  std::vector<double> evals, secs;
  int64_t max_evals = 0;
  int hits = 0;
  for (int s = 0; s < opt.seeds; ++s) {
    auto strat = seed_from_prior(make_strategy(out.strategy), opt.known);
    ReplayObjective obj(rs);
    SearchResult r = run_search(rs.space, *strat, obj, opt.budget, opt.first_seed + uint64_t(s), opt.known);
    double f = std::isfinite(r.best_score) ? rs.optimum_ms / r.best_score : 0.0;
    out.fractions.push_back(f);
    hits += (r.best_score <= rs.optimum_ms);
    evals.push_back(double(r.evaluations));
    secs.push_back(r.seconds);
    max_evals = std::max(max_evals, r.evaluations);
    runs.push_back(std::move(r));
  }
  out.median_fraction = median(out.fractions);
  out.p10_fraction = quantile(out.fractions, 0.10);
  out.p25_fraction = quantile(out.fractions, 0.25);
  out.p75_fraction = quantile(out.fractions, 0.75);
  out.median_evals = median(evals);
  out.median_seconds = median(secs);
  out.hit_rate = double(hits) / opt.seeds;
  // Marks in evaluations, or in charged seconds when the budget is a time.
  out.curve_in_seconds = opt.budget.max_evals < 0 && opt.budget.max_seconds > 0;
  double top = out.curve_in_seconds ? opt.budget.max_seconds
                                    : double(opt.budget.max_evals > 0 ? opt.budget.max_evals : max_evals);
  int npts = std::max(1, opt.curve_points);
  std::vector<double> marks;
  for (int i = 1; i <= npts; ++i) {
    double m = top * i / npts;
    if (!out.curve_in_seconds) m = std::max(1.0, double(std::llround(m)));
    if (marks.empty() || m > marks.back()) marks.push_back(m);
  }
  for (double m : marks) {
    std::vector<double> f;
    for (const auto& r : runs) {
      double best = INFINITY;
      for (const TracePoint& t : r.trace) {
        if ((out.curve_in_seconds ? t.seconds : double(t.evaluations)) > m) break;
        best = t.best;
      }
      f.push_back(std::isfinite(best) ? rs.optimum_ms / best : 0.0);
    }
    out.curve.push_back({m, median(f), quantile(f, 0.25), quantile(f, 0.10)});
  }
  return out;
}

}  // namespace qt::tune
