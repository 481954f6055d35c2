#include "tuner/family/candidate.h"

#include "tuner/static/roofline.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "common/error.h"
#include "tuner/measure/flush.h"
#include "tuner/search/seeded.h"
#include "tuner/search/strategies.h"

namespace qt::tune {

nlohmann::json CandidatePhases::to_json() const { return {{"compile", compile}, {"verify", verify}, {"measure", measure}}; }

CandidatePhases CandidatePhases::from_json(const nlohmann::json& j) {
  CandidatePhases p;
  if (!j.is_object()) return p;
  p.compile = j.value("compile", 0.0);
  p.verify = j.value("verify", 0.0);
  p.measure = j.value("measure", 0.0);
  return p;
}

CandidatePhases& CandidatePhases::operator+=(const CandidatePhases& o) {
  compile += o.compile, verify += o.verify, measure += o.measure;
  return *this;
}

nlohmann::json CandidateOutcome::to_json() const {
  return {{"status", status_name(status)}, {"stats", stats_to_json(stats)}, {"detail", detail}, {"phases", phases.to_json()}};
}

CandidateOutcome CandidateOutcome::from_json(const nlohmann::json& j) {
  CandidateOutcome o;
  o.status = parse_status(j.at("status").get<std::string>());
  o.stats = stats_from_json(j.at("stats"));
  o.detail = j.value("detail", "");
  if (j.contains("phases")) o.phases = CandidatePhases::from_json(j["phases"]);
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

namespace {

// Adds the wall time of `work` to `seconds`, also when it throws.
template <class Work>
auto timed(double& seconds, Work&& work) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Add {
    double& s;
    std::chrono::steady_clock::time_point t0;
    ~Add() { s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  } add{seconds, t0};
  return work();
}

}  // namespace

CandidateOutcome run_candidate(KernelInstance& inst, const nlohmann::json& point, const MeasureOptions& m,
                               const Stats* incumbent, size_t flush_bytes) {
  CandidateOutcome out;
  CandidatePhases& ph = out.phases;
  try {
    timed(ph.compile, [&] { inst.prepare(point); });
    const std::string wrong = timed(ph.verify, [&] {
      inst.run();
      return inst.verify();
    });
    if (!wrong.empty()) {
      out.status = Status::WrongResult;
      out.detail = wrong;
      return out;
    }
    timed(ph.measure, [&] {
      std::unique_ptr<CacheFlusher> flusher;
      std::function<void()> flush;
      if (flush_bytes && inst.flush_device_cache()) {
        flush = [&] { inst.flush_device_cache(); };
      } else if (flush_bytes) {
        flusher = std::make_unique<CacheFlusher>(flush_bytes);
        flush = [&] { (*flusher)(); };
      }
      Measurement meas = measure([&] { return inst.time(); }, flush, m, incumbent);
      out.stats = meas.stats;
      out.status = meas.raced_out ? Status::RacedOut : Status::Ok;
    });
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

namespace {

// The worker's one job: its instance, set up once (the tuner sends "setup" before the first candidate and
// again after a worker restart).
struct WorkerJob {
  std::string key;  // family@sm + shape
  std::shared_ptr<Tunable> family;
  std::unique_ptr<KernelInstance> instance;
  SetupCosts costs;
};

WorkerJob& job_for(const nlohmann::json& j) {
  // Never destroyed: its buffers belong to the worker's device and the emulator's arena, statics made after
  // it (by its first setup) and so destroyed before it at exit, where freeing into them was a double free
  // (glibc aborted the worker after its last reply). The process's end releases everything.
  static WorkerJob& job = *new WorkerJob;
  const int target_sm = j.value("target_sm", 0);
  const auto shape = j.at("shape").get<std::vector<int64_t>>();
  const std::string key =
      j.at("family").get<std::string>() + "@" + std::to_string(target_sm) + nlohmann::json(shape).dump();
  if (job.key != key) {
    // One job at a time: a job's inputs and reference (hundreds of MB for a prefill shape) go with it. The key
    // is set last, so a setup that threw is tried again rather than half used.
    job.instance.reset();
    job.key.clear();
    job.family = find_family(j.at("family").get<std::string>(), target_sm);
    job.instance = job.family->instantiate(shape);
    job.costs = job.instance->setup();
    job.key = key;
  }
  return job;
}

MeasureOptions measure_options(const nlohmann::json& mj) {
  MeasureOptions m;
  m.warmup = mj.value("warmup", m.warmup);
  m.min_reps = mj.value("min_reps", m.min_reps);
  m.max_reps = mj.value("max_reps", m.max_reps);
  m.min_seconds = mj.value("min_seconds", m.min_seconds);
  m.max_seconds = mj.value("max_seconds", m.max_seconds);
  m.batch = mj.value("batch", m.batch);
  m.racing = mj.value("racing", m.racing);
  return m;
}

}  // namespace

std::string handle_candidate_request(const std::string& request) {
  nlohmann::json j = nlohmann::json::parse(request);
  const std::string op = j.value("op", "");
  if (op == "describe") return describe_device(j.at("device").get<std::string>(), j.value("target_sm", 0)).dump();
  if (op == "roofline") return roofline_reply(j).dump();
  if (op == "setup") return job_for(j).costs.to_json().dump();
  WorkerJob& job = job_for(j);
  std::optional<Stats> inc;
  if (j.contains("incumbent")) inc = stats_from_json(j["incumbent"]);
  size_t flush = j.value("flush", false) ? std::max(job.family->flush_bytes(), size_t(1)) : 0;
  return run_candidate(*job.instance, j.at("point"), measure_options(j.at("measure")), inc ? &*inc : nullptr, flush)
      .to_json()
      .dump();
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
    if (std::optional<CandidateOutcome> failed = set_up()) return finish(point, *failed, 0);
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
    rep_.phases += o.phases;
    const double in_phases = o.phases.compile + o.phases.verify + o.phases.measure;
    rep_.worker_seconds += std::max(0.0, r.seconds - in_phases);
    return finish(point, o, r.seconds);
  }

  // The job's one-time work in the worker that runs the next candidate: before the first one, and again in
  // a worker started after a crash or a hang. Its time is accounted, never charged to a candidate's timeout.
  // nullopt when the job is ready; else the outcome every candidate of the job gets (the setup failed once
  // and is not tried per candidate).
  std::optional<CandidateOutcome> set_up() {
    if (setup_failure_) return setup_failure_;
    if (worker_.pid() > 0 && set_up_in_ == worker_.spawned()) return std::nullopt;
    const nlohmann::json req = {{"op", "setup"}, {"family", fam_.name()}, {"target_sm", fam_.target_sm()}, {"shape", shape_}};
    const WorkerReply r = worker_.call(req.dump(), opt_.setup_timeout_s);
    CandidateOutcome failed;
    switch (r.kind) {
      case WorkerReply::Ok: {
        const SetupCosts c = SetupCosts::from_json(nlohmann::json::parse(r.payload));
        rep_.setup += c;
        ++rep_.setups;
        rep_.worker_seconds += std::max(0.0, r.seconds - c.total());
        set_up_in_ = worker_.spawned();
        return std::nullopt;
      }
      case WorkerReply::HandlerError: failed.status = Status::RuntimeError, failed.detail = r.payload; break;
      case WorkerReply::Crashed: failed.status = Status::Crashed, failed.detail = r.reason; break;
      case WorkerReply::TimedOut: failed.status = Status::Timeout, failed.detail = r.reason; break;
    }
    failed.detail = "the job's setup (inputs, reference, device) failed: " + failed.detail;
    rep_.worker_seconds += r.seconds;
    setup_failure_ = failed;
    return failed;
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
  int set_up_in_ = -1;  // the worker (by spawn count) holding this job's setup
  std::optional<CandidateOutcome> setup_failure_;
};

}  // namespace

void TuneAccounting::add(const TuneReport& r) {
  candidates += r.evaluations - r.resumed;
  setups += r.setups;
  setup += r.setup;
  phases += r.phases;
  worker_seconds += r.worker_seconds;
  worker_restarts += r.worker_restarts;
}

std::string TuneAccounting::text(double wall_seconds) const {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "%lld candidates in %.1f s, %.2f candidates/s; in the worker: compiling %.1f s, verifying %.1f s, "
                "measuring %.1f s; job setup %.1f s for %d setups (device %.1f s, inputs %.1f s, references %.1f s%s, "
                "%lld computed and %lld shared by problem and shape, flush buffers %.1f s); worker starts and "
                "messages %.1f s, %d restarts",
                (long long)candidates, wall_seconds, wall_seconds > 0 ? double(candidates) / wall_seconds : 0.0,
                phases.compile, phases.verify, phases.measure, setup.total(), setups, setup.device, setup.inputs,
                setup.reference, setup.reference_on == "device" ? ", large ones on the device" : " on the CPU",
                (long long)setup.references_computed, (long long)setup.references_shared, setup.flush,
                worker_seconds, worker_restarts);
  std::string out = buf;
  if (compile_threads > 0) {
    std::snprintf(buf, sizeof buf, "; NVRTC ahead of the worker: %lld points in %.1f s on %d threads",
                  (long long)compiled_ahead, compile_ahead_seconds, compile_threads);
    out += buf;
  }
  return out;
}

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
  std::unique_ptr<Strategy> strat = seed_from_prior(make_strategy(opt.strategy), &known);
  if (opt.first_points)
    if (std::vector<PointId> first = opt.first_points(space); !first.empty())
      strat = first_points(std::move(strat), std::move(first));
  WorkerObjective obj(family, space, shape, worker, opt, sink, rep);
  SearchResult sr = run_search(space, *strat, obj, opt.budget, opt.seed, &known);
  rep.evaluations = sr.evaluations;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace qt::tune
