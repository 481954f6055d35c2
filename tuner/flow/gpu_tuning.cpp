#include "tuner/flow/gpu_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/progress.h"
#include "kernels_src/registry/registry.h"
#include "tuner/family/blas_baselines.h"
#include "tuner/flow/compile_ahead.h"
#include "tuner/static/roofline.h"
#include "tuner/replay/replay.h"
#include "tuner/store/prior.h"

namespace qt::tune {

namespace {

// The store names of the linear shape's contenders, with their best verified time, for each bucket.
void store_dispatch(const std::vector<GpuJob>& jobs, Store& store, const winners::DeviceFingerprint& device,
                    const std::string& run_id, std::vector<std::string>& lines) {
  struct Key {
    std::string op, weight_type;
    std::vector<int64_t> rest;
    bool operator<(const Key& o) const { return std::tie(op, weight_type, rest) < std::tie(o.op, o.weight_type, o.rest); }
  };
  std::map<Key, std::map<int64_t, std::vector<winners::Ranked>>> groups;
  for (const GpuJob& j : jobs) {
    const kernels::KernelFamily& f = j.family->family();
    if (!j.batched || f.weight_types.size() != 1) continue;
    const Key key{f.op, weight_type_name(f.weight_types[0]), {j.shape.begin() + 1, j.shape.end()}};
    auto& per_bucket = groups[key][j.shape[0]];
    const auto w = store.lookup(device, j.family->name(), j.family->dtypes(), j.shape, j.family->source_hash());
    if (w && w->exact) per_bucket.push_back({j.family->name(), w->median_s});
  }
  for (auto& [key, buckets] : groups) {
    std::vector<winners::DispatchEntry> entries;
    for (auto& [m, ranking] : buckets) {
      if (ranking.empty()) continue;
      std::sort(ranking.begin(), ranking.end(), [](const auto& a, const auto& b) { return a.median_s < b.median_s; });
      entries.push_back({m, ranking});
    }
    if (entries.empty()) continue;
    store.put_dispatch(device, key.op, key.weight_type, key.rest, entries, run_id);
    // Leaders by bucket range: "awq_gemv M<=4, awq_gemm M>=8".
    std::string line = key.op + " " + key.weight_type + " " + shape_text(key.rest) + ": " +
                       entries.front().ranking.front().family + " from M=" + std::to_string(entries.front().bucket);
    for (const winners::Crossover& c : winners::crossovers(entries))
      line += ", " + c.above + " from M=" + std::to_string(c.m);
    lines.push_back(line);
  }
}

// The baselines at each batched linear job's shape, and with `predequantize` the fp16 families and cuBLASLt
// at each quantized linear shape as fp16 (G = K), once per (family, shape).
void add_linear_extras(std::vector<GpuJob>& jobs, const GpuTuningOptions& opt) {
  std::set<std::pair<std::string, std::vector<int64_t>>> have;
  for (const GpuJob& j : jobs) have.insert({j.family->name(), j.shape});
  std::vector<GpuJob> extra;
  auto add = [&](const kernels::KernelFamily& f, std::vector<int64_t> shape) {
    auto t = std::make_shared<Tunable>(f, opt.device, opt.target_sm);
    if (!have.insert({t->name(), shape}).second) return;
    const size_t n = t->space(shape).size();
    if (n == 0) return;
    extra.push_back({t, shape, std::min<int64_t>(parse_eval_budget(opt.budget, n), int64_t(n)), true});
  };
  std::vector<const kernels::KernelFamily*> f16_linears;
  for (const kernels::KernelFamily* f : kernels::all_families())
    if (!f->on_host() && f->op == "linear" && f->weight_types == std::vector<WeightType>{WeightType::F16} &&
        (opt.target_sm == 0 || f->min_sm <= opt.target_sm))
      f16_linears.push_back(f);
  for (const GpuJob& j : jobs) {
    const kernels::KernelFamily& f = j.family->family();
    if (!j.batched || f.weight_types.size() != 1) continue;
    const WeightType t = f.weight_types[0];
    // The baseline reading the weights in this family's layout: it ranks in the same dispatch.
    if (opt.baselines)
      if (const kernels::KernelFamily* b = blas_baseline_for(t, f.op)) add(*b, j.shape);
    if (f.op != "linear") continue;
    if (opt.predequantize && weight_traits(t).quantized && j.shape.size() == 4) {
      const std::vector<int64_t> fp16{j.shape[0], j.shape[1], j.shape[2], j.shape[2]};
      for (const kernels::KernelFamily* g : f16_linears) add(*g, fp16);
      if (opt.baselines) add(*blas_baseline_for(WeightType::F16, "linear"), fp16);
    }
  }
  jobs.insert(jobs.end(), extra.begin(), extra.end());
}

// The roofline model's times (roofline.h, without registers: no compile is waited for) of `points`, asked of
// the worker: the model runs the family's plan, which is family code the tuner never runs itself. NaN where
// the model cannot place a point, or everywhere when the worker fails.
std::vector<double> model_times(Worker& worker, const Tunable& fam, const std::vector<int64_t>& shape, int sm,
                                const std::vector<nlohmann::json>& points) {
  std::vector<double> out(points.size(), std::numeric_limits<double>::quiet_NaN());
  if (sm <= 0 || is_blas_baseline(fam.family()) || points.empty()) return out;
  const nlohmann::json req = {{"op", "roofline"}, {"family", fam.name()}, {"shape", shape}, {"sm", sm}, {"points", points}};
  const WorkerReply r = worker.call(req.dump(), 120);
  if (r.kind != WorkerReply::Ok) return out;
  const nlohmann::json times = nlohmann::json::parse(r.payload);
  for (size_t i = 0; i < out.size() && i < times.size(); ++i)
    if (times[i].is_number()) out[i] = times[i].get<double>();
  return out;
}

// The model's times as a prior: the search tries the points it ranks fastest first.
Knowledge roofline_knowledge(Worker& worker, const Tunable& fam, const Space& space, const std::vector<int64_t>& shape,
                             int sm) {
  std::vector<nlohmann::json> points;
  for (PointId id = 0; id < space.size(); ++id) points.push_back(nlohmann::json::parse(space.point_json(id)));
  Knowledge k;
  k.prior_time = model_times(worker, fam, shape, sm, points);
  if (std::none_of(k.prior_time.begin(), k.prior_time.end(), [](double t) { return std::isfinite(t); }))
    return Knowledge{};
  k.prior_source = "roofline model, sm_" + std::to_string(sm);
  return k;
}

// Spearman's rank correlation between the roofline model and this device's verified times for the job's points;
// NaN when fewer than 3 points were measured or the model cannot place them.
double model_correlation(Worker& worker, const Tunable& fam, const std::vector<int64_t>& shape, int sm,
                         const Store& store, const winners::DeviceFingerprint& device) {
  std::vector<nlohmann::json> points;
  std::vector<double> measured;
  for (const ResultRow& r : store.rows(fam.name())) {
    if (r.device.key() != device.key() || r.shape != shape || r.source_hash != fam.source_hash() ||
        r.status != Status::Ok || !(r.stats.median > 0))
      continue;
    points.push_back(r.point);
    measured.push_back(r.stats.median);
  }
  if (points.size() < 3) return std::numeric_limits<double>::quiet_NaN();  // spearman's own answer, without the worker
  const std::vector<double> model = model_times(worker, fam, shape, sm, points);
  std::vector<double> a, b;
  for (size_t i = 0; i < model.size(); ++i)
    if (std::isfinite(model[i])) a.push_back(model[i]), b.push_back(measured[i]);
  return spearman(a, b);
}

// The weight types the device runtime holds the model's tensors in: the file's, with fp32 and bf16 tensors as
// the fp16 the device keeps them in.
std::set<WeightType> device_weight_types(const ModelWeights& w) {
  std::set<WeightType> out;
  auto add = [&](const QTensor& t) {
    if (t.empty()) return;
    out.insert(t.type == WeightType::F32 || t.type == WeightType::BF16 ? WeightType::F16 : t.type);
  };
  add(w.embedding);
  add(w.classifier);
  for (const LayerWeights& l : w.layers) {
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3, &l.router}) add(*t);
    for (const ExpertStack* e : {&l.expert_w1, &l.expert_w2, &l.expert_w3}) add(e->base);
  }
  return out;
}

// The order jobs are visited in within a round: one job of each family in turn (the plan's order within a
// family), so that a run cut short by its time limit has touched every family, not the first few.
std::vector<size_t> interleaved_order(const std::vector<GpuJob>& jobs) {
  std::vector<std::string> families;
  std::map<std::string, std::vector<size_t>> of_family;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string name = jobs[i].family->name();
    if (!of_family.count(name)) families.push_back(name);
    of_family[name].push_back(i);
  }
  std::vector<size_t> order;
  for (size_t k = 0; order.size() < jobs.size(); ++k)
    for (const std::string& name : families)
      if (k < of_family[name].size()) order.push_back(of_family[name][k]);
  return order;
}

// The space's ids of `points`, in their order; a point the space lacks is left out. One pass over the space.
std::vector<PointId> listed_point_ids(const Tunable& fam, const Space& space, const std::vector<kernels::Point>& points) {
  std::vector<PointId> ids(points.size(), space.size());
  for (PointId id = 0; id < space.size(); ++id) {
    const kernels::Point p = fam.to_point(nlohmann::json::parse(space.point_json(id)));
    for (size_t i = 0; i < points.size(); ++i)
      if (ids[i] == space.size() && points[i] == p) ids[i] = id;
  }
  std::erase(ids, space.size());
  return ids;
}

// The ids of the family's default points for the job's shape that its space holds, in the family's order:
// what a job measures before its search (round 1 the first of them).
std::vector<PointId> default_point_ids(const Tunable& fam, const Space& space, const std::vector<int64_t>& shape) {
  const kernels::KernelFamily& f = fam.family();
  return listed_point_ids(fam, space, f.default_points(f.shape(shape)));
}

// A job's evaluations in round 2 under the run's time limit: what it already has plus its share of the time
// left (shared evenly among the jobs left, at the run's own cost per candidate so far, setups included),
// never above its budget; `done` when no time is left.
int64_t time_limited_budget(const GpuJob& job, const GpuTuningOptions& opt, double elapsed_s, int64_t evaluated,
                            size_t jobs_left, int64_t done) {
  if (opt.time_limit_s <= 0) return job.budget;
  const double left_s = opt.time_limit_s - elapsed_s;
  if (left_s <= 0) return done;
  if (evaluated == 0) return job.budget;
  const double per_candidate_s = elapsed_s / double(evaluated);
  const int64_t affordable = int64_t(left_s / double(jobs_left) / per_candidate_s);
  return std::clamp<int64_t>(done + affordable, done, job.budget);
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

ResultRow outcome_row(const winners::DeviceFingerprint& device, const Tunable& family, const std::vector<int64_t>& shape,
                      const nlohmann::json& point, const CandidateOutcome& outcome, const std::string& run_id) {
  ResultRow row;
  row.device = device;
  row.family = family.name();
  row.source_hash = family.source_hash();
  row.shape = shape;
  row.dtypes = family.dtypes();
  row.point = point;
  row.status = outcome.status;
  row.stats = outcome.stats;
  row.detail = outcome.detail;
  row.run_id = run_id;
  return row;
}

std::vector<GpuJob> plan_gpu_jobs(const ModelConfig& config, const ModelWeights* weights, const GpuTuningOptions& opt) {
  std::vector<std::string> names = opt.families;
  const bool all = names.size() == 1 && names[0] == "all";
  const bool by_default = names.empty();  // then only the shapes the runtime runs on each family
  if (names.empty() || all) {
    names.clear();
    for (const kernels::KernelFamily* f : kernels::all_families())
      if (!f->on_host() && f->model_shapes && (all || kernels::dispatched_by_default(*f))) names.push_back(f->name);
  }
  // A family of a weight type the model has none of (the INT8 families for an AWQ model) has shapes from the
  // config alone, but nothing to run them on.
  const std::set<WeightType> types = weights ? device_weight_types(*weights) : std::set<WeightType>{};
  std::vector<GpuJob> jobs;
  for (const std::string& name : names) {
    auto fam = find_family(opt.device + "." + name, opt.target_sm);
    const kernels::KernelFamily& f = fam->family();
    if (opt.target_sm > 0 && f.min_sm > opt.target_sm) continue;
    if (!f.model_shapes) continue;
    if (weights && !f.weight_types.empty() &&
        std::none_of(f.weight_types.begin(), f.weight_types.end(), [&](WeightType t) { return types.count(t) > 0; }))
      continue;
    const bool batched = !f.dims.empty() && f.dims[0] == "M";
    std::set<std::vector<int64_t>> seen;
    for (const kernels::Shape& s : f.model_shapes(config, weights)) {
      if (by_default && !kernels::dispatched_by_default(f, s)) continue;
      std::vector<std::vector<int64_t>> variants;
      if (!batched) variants.push_back(s.values);
      for (int64_t m : batched ? opt.buckets : std::vector<int64_t>{}) {
        if (s.max_rows > 0 && m > s.max_rows) continue;  // a batch the runtime never runs this shape at
        std::vector<int64_t> v = s.values;
        v[0] = m;
        variants.push_back(v);
      }
      for (const auto& v : variants) {
        if (!seen.insert(v).second) continue;
        const size_t n = fam->space(v).size();
        if (n == 0) continue;  // a bucket this family cannot run (a GEMV at large M)
        jobs.push_back({fam, v, std::min<int64_t>(parse_eval_budget(opt.budget, n), int64_t(n)), batched});
      }
    }
  }
  add_linear_extras(jobs, opt);
  if (jobs.empty()) throw Error("no device kernel family has a shape of this model to tune");
  return jobs;
}

std::map<std::string, CandidateOutcome> recorded_outcomes(const Store& store, const winners::DeviceFingerprint& device,
                                                          const Tunable& family, const std::vector<int64_t>& shape) {
  std::map<std::string, CandidateOutcome> out;
  const std::string me = device.key();
  for (const ResultRow& r : store.rows(family.name())) {
    if (r.device.key() != me || r.source_hash != family.source_hash() || r.dtypes != family.dtypes() || r.shape != shape)
      continue;
    CandidateOutcome o;
    o.status = r.status;
    o.stats = r.stats;
    o.detail = r.detail;
    out[r.point.dump()] = o;
  }
  return out;
}

winners::DeviceFingerprint worker_device_fingerprint(Worker& worker, const std::string& device, int target_sm) {
  const nlohmann::json req = {{"op", "describe"}, {"device", device}, {"target_sm", target_sm}};
  // Creating a CUDA context and reading the attributes takes seconds at most; a driver that hangs is no GPU.
  const WorkerReply r = worker.call(req.dump(), 120);
  switch (r.kind) {
    case WorkerReply::Ok: return winners::DeviceFingerprint::from_json(nlohmann::json::parse(r.payload));
    case WorkerReply::HandlerError: throw Error("no " + device + " device: " + r.payload, kExitUnavailable);
    case WorkerReply::Crashed:
    case WorkerReply::TimedOut: break;
  }
  throw Error("no " + device + " device: the worker asking for it " + r.reason, kExitUnavailable);
}

GpuTuningResult tune_gpu_jobs(const std::vector<GpuJob>& jobs, Store& store, Worker& worker,
                              const winners::DeviceFingerprint& device, const GpuTuningOptions& opt,
                              const std::string& run_id) {
  GpuTuningResult res;
  const int sm = opt.target_sm > 0 ? opt.target_sm : std::atoi(device.arch.c_str() + (device.arch.rfind("sm_", 0) == 0 ? 3 : 0));
  CompileAhead ahead(sm, sm > 0 ? opt.compile_threads : 0);
  // Every family's default points first, the round-1 candidates of every job, then the rest of each space.
  std::vector<const kernels::KernelFamily*> families;
  for (const GpuJob& j : jobs) {
    const kernels::KernelFamily& f = j.family->family();
    if (!is_blas_baseline(f) && std::find(families.begin(), families.end(), &f) == families.end()) families.push_back(&f);
  }
  std::map<const kernels::KernelFamily*, std::vector<kernels::Point>> defaults;
  for (const GpuJob& j : jobs) {
    const kernels::KernelFamily& f = j.family->family();
    if (is_blas_baseline(f)) continue;
    std::vector<kernels::Point>& d = defaults[&f];
    for (const kernels::Point& p : f.default_points(f.shape(j.shape)))
      if (std::find(d.begin(), d.end(), p) == d.end()) d.push_back(p);
  }
  // An experiment measures its listed points and nothing else: those alone, in its order, are compiled ahead.
  const bool listed = std::any_of(jobs.begin(), jobs.end(), [](const GpuJob& j) { return !j.listed.empty(); });
  if (listed) {
    for (const GpuJob& j : jobs)
      if (!is_blas_baseline(j.family->family())) ahead.enqueue(j.family->family(), j.listed);
  }
  for (const kernels::KernelFamily* f : listed ? std::vector<const kernels::KernelFamily*>{} : families)
    ahead.enqueue(*f, defaults[f]);
  for (const kernels::KernelFamily* f : listed ? std::vector<const kernels::KernelFamily*>{} : families) {
    std::vector<kernels::Point> rest;
    for (const kernels::Point& p : kernels::enumerate_points(*f))
      if (std::find(defaults[f].begin(), defaults[f].end(), p) == defaults[f].end()) rest.push_back(p);
    ahead.enqueue(*f, rest);
  }

  int64_t total = 0;
  for (const GpuJob& j : jobs) total += j.budget;
  Progress progress("tuning", double(total), "candidates", opt.quiet);
  int64_t done = 0, evaluated = 0;
  // Two rounds over the jobs, each visiting one job of every family in turn. Round 1 measures every job's
  // default point (the baselines' first algorithm): each family, shape and bucket the runtime could dispatch
  // gets a verified time before any job searches further. Round 2 searches each job up to its budget, the
  // time left shared among the jobs left. A job's second round starts with the same default point, served from
  // the store, so its budget counts every point once.
  const std::vector<size_t> order = interleaved_order(jobs);
  std::vector<std::optional<TuneReport>> reports(jobs.size());
  std::vector<std::set<std::string>> counted(jobs.size());  // points this run measured or resumed, per job
  std::vector<int64_t> job_evaluations(jobs.size(), 0);
  std::vector<bool> setup_failed(jobs.size(), false);  // its setup failed: every further point would fail so
  bool out_of_time = false;
  for (int round = 1; round <= 2 && !out_of_time; ++round) {
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const size_t i = order[pos];
      const GpuJob& job = jobs[i];
      const Tunable& fam = *job.family;
      if (round == 2 && (!reports[i] || setup_failed[i])) continue;  // never started, or cannot run
      const double elapsed = progress.elapsed_seconds();
      if (opt.time_limit_s > 0 && elapsed >= opt.time_limit_s) {
        out_of_time = true;
        break;
      }
      TuneOptions t = opt.tune;
      bool cut_by_limit = false;  // a worker call of this job the time limit cut short
      // A job's setup (inputs, reference) can take a minute on a large shape: it may not run past the time limit,
      // which a caller (run.sh's phases) relies on to stop on its own. One cut there is not stored (below).
      if (opt.time_limit_s > 0)
        t.setup_timeout_s = std::min(t.setup_timeout_s, std::max(1.0, opt.time_limit_s - elapsed));
      const int64_t budget =
          round == 1 ? std::min<int64_t>(1, job.budget)
                     : time_limited_budget(job, opt, elapsed, evaluated, order.size() - pos, job_evaluations[i]);
      if (budget <= job_evaluations[i]) continue;  // round 1 measured all it may have
      t.budget = Budget{budget, -1};
      const std::map<std::string, CandidateOutcome> earlier = recorded_outcomes(store, device, fam, job.shape);
      t.recorded = [&](const nlohmann::json& point) -> std::optional<CandidateOutcome> {
        auto it = earlier.find(point.dump());
        if (it == earlier.end()) return std::nullopt;
        return it->second;
      };
      t.first_points = [&](const Space& space) {
        return job.listed.empty() ? default_point_ids(fam, space, job.shape) : listed_point_ids(fam, space, job.listed);
      };
      if (!job.listed.empty())  // an experiment measures its points in its order: nothing to rank
        t.knowledge = [](const Space&) { return Knowledge{}; };
      if (!t.knowledge)
        t.knowledge = [&, round](const Space& space) {
          // Round 1 measures the default point, whatever is known: ask nothing of the store or the model.
          if (round == 1 && !default_point_ids(fam, space, job.shape).empty()) return Knowledge{};
          Knowledge k = prior_from_store(store, space, device, fam.name(), fam.source_hash(), fam.dtypes(), job.shape);
          // Without another GPU's results, the roofline model orders the first candidates.
          if (!k.has_prior() && sm > 0) k = roofline_knowledge(worker, fam, space, job.shape, sm);
          return k;
        };
      const std::string label = "round " + std::to_string(round) + ", shape " + std::to_string(pos + 1) + "/" +
                                std::to_string(jobs.size()) + " " + fam.family().name + " " + shape_text(job.shape);
      TuneReport rep = tune_shape(fam, job.shape, worker, t, [&](const nlohmann::json& point, const CandidateOutcome& o) {
        const std::string key = point.dump();
        // Cut by the time limit, not a property of the point: not stored, so the same command measures it again.
        if (!o.from_store && o.status == Status::Timeout && opt.time_limit_s > 0 &&
            progress.elapsed_seconds() >= opt.time_limit_s) {
          cut_by_limit = true;
          return;
        }
        if (o.detail.rfind("the job's setup", 0) == 0) setup_failed[i] = true;
        // A point round 1 measured (or resumed) comes back from the store in round 2: counted once.
        if (!counted[i].insert(key).second && o.from_store) return;
        if (!o.from_store) {
          store.put(outcome_row(device, fam, job.shape, point, o, run_id));
          ++res.measured, ++evaluated;
        } else {
          ++res.resumed;
        }
        ++res.statuses[status_name(o.status)];
        progress.update(double(++done), label);
      });
      job_evaluations[i] = rep.evaluations;
      res.accounting.add(rep);
      if (cut_by_limit && counted[i].empty()) {
        out_of_time = true;  // a job the limit cut before it measured anything is left to the next run
        break;
      }
      reports[i] = std::move(rep);
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!reports[i]) {
      ++res.unfinished_jobs;
      TuneReport none;
      none.shape = jobs[i].shape;
      reports[i] = none;
    }
    res.model_rank_correlation.push_back(
        reports[i]->evaluations > 0 ? model_correlation(worker, *jobs[i].family, jobs[i].shape, sm, store, device)
                                    : std::numeric_limits<double>::quiet_NaN());
    res.reports.push_back(std::move(*reports[i]));
  }
  progress.finish();
  res.accounting.compiled_ahead = ahead.compiled();
  res.accounting.compile_ahead_seconds = ahead.seconds();
  res.accounting.compile_threads = sm > 0 ? opt.compile_threads : 0;
  if (opt.store_dispatch) store_dispatch(jobs, store, device, run_id, res.dispatch_lines);
  res.seconds = progress.elapsed_seconds();
  return res;
}

}  // namespace qt::tune
