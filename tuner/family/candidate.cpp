#include "tuner/family/candidate.h"

#include "tuner/static/roofline.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "common/error.h"
#include "tuner/measure/flush.h"
#include "tuner/search/seeded.h"
#include "tuner/search/strategies.h"

namespace qt::tune {

nlohmann::json CandidateOutcome::to_json() const {
  return {{"status", status_name(status)}, {"stats", stats_to_json(stats)}, {"detail", detail}};
}

CandidateOutcome CandidateOutcome::from_json(const nlohmann::json& j) {
  CandidateOutcome o;
  o.status = parse_status(j.at("status").get<std::string>());
  o.stats = stats_from_json(j.at("stats"));
  o.detail = j.value("detail", "");
  return o;
}

std::string KernelInstance::verify() {
  const std::vector<float>& ref = reference();
  double ss = 0;
  for (float v : ref) ss += double(v) * v;
  const double rms = ref.empty() ? 0 : std::sqrt(ss / double(ref.size()));
  const VerifyResult vr = verify_output(ref.data(), output(), ref.size(), tolerance(rms));
  return vr.ok ? std::string() : vr.summary();
}

CandidateOutcome run_candidate(KernelInstance& inst, const nlohmann::json& point, const MeasureOptions& m,
                               const Stats* incumbent, size_t flush_bytes) {
  CandidateOutcome out;
  try {
    inst.prepare(point);
    inst.reference();
    inst.run();
    if (const std::string wrong = inst.verify(); !wrong.empty()) {
      out.status = Status::WrongResult;
      out.detail = wrong;
      return out;
    }
    std::unique_ptr<CacheFlusher> flusher;
    std::function<void()> flush;
    if (flush_bytes && inst.flush_device_cache()) {
      flush = [&] { inst.flush_device_cache(); };
    } else if (flush_bytes) {
      flusher = std::make_unique<CacheFlusher>(flush_bytes);
      flush = [&] { (*flusher)(); };
    }
    Measurement meas = measure([&] { return inst.run(); }, flush, m, incumbent);
    out.stats = meas.stats;
    out.status = meas.raced_out ? Status::RacedOut : Status::Ok;
  } catch (const CandidateError& e) {
    out.status = e.status;
    out.detail = e.what();
  } catch (const std::bad_alloc&) {
    out.status = Status::ResourceFailed;
    out.detail = "out of memory";
  } catch (const std::exception& e) {
    out.status = Status::RuntimeError;
    out.detail = e.what();
  }
  return out;
}

namespace {

// {"op": "roofline", "family", "shape", "sm", "points": [...]} -> the model's seconds per point (null where it
// cannot place one). In the worker, because the model runs the family's plan, which is family code.
nlohmann::json roofline_reply(const nlohmann::json& j) {
  const std::shared_ptr<Tunable> fam = find_family(j.at("family").get<std::string>());
  const kernels::Shape shape = fam->family().shape(j.at("shape").get<std::vector<int64_t>>());
  const int sm = j.at("sm").get<int>();
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& p : j.at("points")) {
    try {
      out.push_back(estimate_point(fam->family(), fam->to_point(p), shape, sm).seconds);
    } catch (const std::exception&) {
      out.push_back(nullptr);  // an invalid point, or an architecture without figures
    }
  }
  return out;
}

}  // namespace

std::string handle_candidate_request(const std::string& request) {
  static std::map<std::string, std::unique_ptr<KernelInstance>> instances;
  nlohmann::json j = nlohmann::json::parse(request);
  if (j.value("op", "") == "describe")
    return describe_device(j.at("device").get<std::string>(), j.value("target_sm", 0)).dump();
  if (j.value("op", "") == "roofline") return roofline_reply(j).dump();
  static std::map<std::string, std::shared_ptr<Tunable>> families;  // instances refer to their family
  const int target_sm = j.value("target_sm", 0);
  const std::string family_key = j.at("family").get<std::string>() + "@" + std::to_string(target_sm);
  auto& fam = families[family_key];
  if (!fam) fam = find_family(j.at("family").get<std::string>(), target_sm);
  auto shape = j.at("shape").get<std::vector<int64_t>>();
  std::string key = family_key + nlohmann::json(shape).dump();
  auto& inst = instances[key];
  if (!inst) inst = fam->instantiate(shape);
  MeasureOptions m;
  const auto& mj = j.at("measure");
  m.warmup = mj.value("warmup", m.warmup);
  m.min_reps = mj.value("min_reps", m.min_reps);
  m.max_reps = mj.value("max_reps", m.max_reps);
  m.min_seconds = mj.value("min_seconds", m.min_seconds);
  m.max_seconds = mj.value("max_seconds", m.max_seconds);
  m.batch = mj.value("batch", m.batch);
  m.racing = mj.value("racing", m.racing);
  std::optional<Stats> inc;
  if (j.contains("incumbent")) inc = stats_from_json(j["incumbent"]);
  size_t flush = j.value("flush", false) ? std::max(fam->flush_bytes(), size_t(1)) : 0;
  return run_candidate(*inst, j.at("point"), m, inc ? &*inc : nullptr, flush).to_json().dump();
}

namespace {

class WorkerObjective : public Objective {
 public:
  WorkerObjective(const Tunable& f, const Space& s, const std::vector<int64_t>& shape, Worker& w,
                  const TuneOptions& o, const CandidateSink& sink, TuneReport& rep)
      : fam_(f), space_(s), shape_(shape), worker_(w), opt_(o), sink_(sink), rep_(rep) {}

  Observation evaluate(PointId id) override {
    nlohmann::json point = nlohmann::json::parse(space_.point_json(id));
    if (opt_.recorded)
      if (std::optional<CandidateOutcome> o = opt_.recorded(point)) {
        o->from_store = true;
        ++rep_.resumed;
        return finish(point, *o, 0);
      }
    nlohmann::json req = {{"family", fam_.name()},
                          {"target_sm", fam_.target_sm()},
                          {"shape", shape_},
                          {"point", point},
                          {"flush", opt_.flush},
                          {"measure",
                           {{"warmup", opt_.measure.warmup},
                            {"min_reps", opt_.measure.min_reps},
                            {"max_reps", opt_.measure.max_reps},
                            {"min_seconds", opt_.measure.min_seconds},
                            {"max_seconds", opt_.measure.max_seconds},
                            {"batch", opt_.measure.batch},
                            {"racing", opt_.measure.racing}}}};
    if (incumbent_) req["incumbent"] = stats_to_json(*incumbent_, false);
    int spawned_before = worker_.spawned();
    WorkerReply r = worker_.call(req.dump(), opt_.timeout_s);
    if (spawned_before > 0 && worker_.spawned() > spawned_before) ++rep_.worker_restarts;
    CandidateOutcome o;
    switch (r.kind) {
      case WorkerReply::Ok: o = CandidateOutcome::from_json(nlohmann::json::parse(r.payload)); break;
      case WorkerReply::HandlerError: o.status = Status::RuntimeError, o.detail = r.payload; break;
      case WorkerReply::Crashed: o.status = Status::Crashed, o.detail = r.reason; break;
      case WorkerReply::TimedOut: o.status = Status::Timeout, o.detail = r.reason; break;
    }
    return finish(point, o, r.seconds);
  }

  Observation finish(const nlohmann::json& point, const CandidateOutcome& o, double cost_s) {
    rep_.status_counts[status_name(o.status)]++;
    if (o.status == Status::Ok && (!incumbent_ || o.stats.median < incumbent_->median)) {
      incumbent_ = o.stats;
      rep_.best_point = point;
      rep_.best_stats = o.stats;
    }
    if (sink_) sink_(point, o);
    Observation ob;
    ob.status = o.status;
    ob.time = o.stats.median;
    ob.cost_s = cost_s;
    ob.detail = o.detail;
    return ob;
  }

 private:
  const Tunable& fam_;
  const Space& space_;
  std::vector<int64_t> shape_;
  Worker& worker_;
  const TuneOptions& opt_;
  const CandidateSink& sink_;
  TuneReport& rep_;
  std::optional<Stats> incumbent_;
};

}  // namespace

TuneReport tune_shape(const Tunable& family, const std::vector<int64_t>& shape, Worker& worker,
                      const TuneOptions& opt, const CandidateSink& sink) {
  auto t0 = std::chrono::steady_clock::now();
  TuneReport rep;
  rep.shape = shape;
  Space space = family.space(shape);
  rep.space_size = space.size();
  if (space.size() == 0) throw Error("kernel family " + family.name() + " has no valid point for this shape");
  Knowledge known;
  if (opt.knowledge) known = opt.knowledge(space);
  auto strat = seed_from_prior(make_strategy(opt.strategy), &known);
  WorkerObjective obj(family, space, shape, worker, opt, sink, rep);
  SearchResult sr = run_search(space, *strat, obj, opt.budget, opt.seed, &known);
  rep.evaluations = sr.evaluations;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace qt::tune
