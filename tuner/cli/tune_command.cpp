// `qtune --device cpu --model X.bin`: derives the matvec shapes the model needs, tunes each on this
// machine's CPU in a crash-isolated worker, writes every measured candidate to the store, and prints the
// winners. `qtune --model X.bin --gpu sm86`: the same shapes for a GPU; without one, says so and runs the
// static compile-and-prune step only.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <map>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "tuner/family/blas_baselines.h"
#include "device/arch/arch_limits.h"
#include "common/flag_ranges.h"
#include "common/progress.h"
#include "models/formats/model_file.h"
#include "tuner/cli/commands.h"
#include "device/winners/fingerprint.h"
#include "kernels_src/cpu_matvec/cpu_matvec_family.h"
#include "kernels_src/registry/registry.h"
#include "tuner/family/candidate.h"
#include "tuner/flow/experiments.h"
#include "tuner/flow/gpu_tuning.h"
#include "tuner/replay/replay.h"
#include "tuner/search/strategies.h"
#include "tuner/static/static_knowledge.h"
#include "tuner/store/prior.h"
#include "tuner/store/store.h"

namespace qt::tune {

namespace {

using kernels::cpu_matvec::MatvecShape;
using kernels::cpu_matvec::matvec_family_name;
using kernels::cpu_matvec::model_matvec_shapes;
using winners::cpu_fingerprint;

// The [M, N, K, G]-style shapes a model needs from a device family, as plain values.
std::vector<std::vector<int64_t>> device_model_shapes(const std::string& family, const ModelFile& mf) {
  std::vector<std::vector<int64_t>> out;
  const kernels::KernelFamily& f = kernels::find_family(family);
  if (!f.model_shapes) return out;
  for (const auto& s : f.model_shapes(mf.config(), &mf.weights())) out.push_back(s.values);
  return out;
}

WeightType parse_type(const std::string& s) {
  if (const auto t = quantized_type_by_short_name(s)) return *t;
  throw Error("unknown --type '" + s + "' (q8_0, int8_sym, int8_asym, awq_int4)");
}

std::string run_id() { return "qtune-" + utc_timestamp(); }

// Search and measurement options shared by the CPU, emulator and GPU flows.
TuneOptions tune_options(const CliArgs& cli, bool emu) {
  TuneOptions opt;
  opt.strategy = cli.get("--strategy");
  make_strategy(opt.strategy);
  opt.seed = cli.get_int_as<uint64_t>("--seed");
  opt.timeout_s = cli.given("--timeout") ? cli.get_double("--timeout") : emu ? 300.0 : 20.0;
  opt.measure.min_reps = cli.get_int_as<int>("--min-reps");
  opt.measure.max_reps = std::max(opt.measure.max_reps, opt.measure.min_reps);
  opt.measure.min_seconds = cli.get_double("--min-time");
  opt.measure.racing = !cli.get_flag("--no-racing");
  if (emu) {  // correctness only: one verified run per point, emulator time means nothing
    opt.measure.warmup = 0;
    opt.measure.min_reps = opt.measure.max_reps = 1;
    opt.measure.min_seconds = 0;
    opt.measure.racing = false;
  }
  return opt;
}

// The model's shapes per GPU family, as the static step and the tuning flow see them.
void print_model_shapes(const std::string& path, const ModelFile& mf) {
  auto shapes = model_matvec_shapes(mf.weights());
  std::printf("model %s needs %zu matvec shapes:\n", path.c_str(), shapes.size());
  for (const auto& s : shapes)
    std::printf("  %-18s %-10s %s\n", shape_text(s.shape).c_str(), weight_type_name(s.type), s.what.c_str());
  // The GPU kernel families' own shape lists (registry model_shapes: GEMV for decode, GEMM for prefill).
  for (const std::string& fam : family_names("emu")) {
    std::string reg = fam.substr(4);
    auto gs = device_model_shapes(reg, mf);
    std::printf("GPU family %-14s %zu shapes%s", reg.c_str(), gs.size(), gs.empty() ? " (does not serve this model)\n" : ":");
    for (const auto& s : gs) std::printf(" %s", shape_text(s).c_str());
    if (!gs.empty()) {
      std::string dims;
      for (const std::string& d : qt::kernels::find_family(reg).dims) dims += (dims.empty() ? "" : " x ") + d;
      std::printf("  (%s)\n", dims.c_str());
    }
  }
}

// `qtune --model X.bin --gpu smNN [--device emu]`: gpu_tuning.h's flow. Without a GPU: the static table, one
// line saying why, exit code 3.
int gpu_flow(const CliArgs& cli, const std::string& device, int target_sm) {
  const bool experiments = cli.given("--points");
  if (experiments) {
    for (const char* o : {"--model", "--families", "--buckets", "--budget"})
      if (cli.given(o)) throw Error(std::string("--points measures the file's points and nothing else: drop ") + o);
    for (const char* f : {"--predequantize", "--static-only"})
      if (cli.get_flag(f)) throw Error(std::string("--points measures the file's points and nothing else: drop ") + f);
  } else if (!cli.given("--model")) {
    throw Error("--gpu needs --model X.bin (or --points FILE: experiments)");
  }
  const std::string arch = "sm" + std::to_string(target_sm);
  std::vector<std::string> families;
  if (auto f = cli.get_optional("--families")) {
    for (size_t p = 0; p <= f->size();) {
      size_t q = f->find(',', p);
      if (q == std::string::npos) q = f->size();
      if (q > p) families.push_back(f->substr(p, q - p));
      p = q + 1;
    }
    // Before any output: a mistyped name is one line, not the end of a plan.
    if (families.empty()) throw Error("--families: no family named in '" + *f + "'");
    if (families.size() > 1 && std::find(families.begin(), families.end(), "all") != families.end())
      throw Error("--families: `all` already names every family; give it alone");
    for (const std::string& name : families) {
      if (name == "all") continue;
      bool known = find_blas_baseline(name) != nullptr;
      for (const kernels::KernelFamily* family : kernels::all_families()) known = known || family->name == name;
      if (!known) throw Error("--families: unknown kernel family '" + name + "' (`qtune families` lists them)");
    }
  }
  std::unique_ptr<ModelFile> mf;
  if (!experiments) {
    mf = ModelFile::open(cli.get("--model"));
    print_model_shapes(cli.get("--model"), *mf);
  }
  auto static_step = [&] {
    std::fflush(stdout);
    return static_command({"--gpu", arch, "--model", cli.get("--model")});
  };
  if (cli.get_flag("--static-only")) return static_step();

  const bool emu = device == "emu";
  GpuTuningOptions opt;
  opt.device = device;
  opt.target_sm = target_sm;
  if (cli.given("--families")) opt.families = families;
  if (cli.given("--buckets")) opt.buckets = parse_int_list(cli.get("--buckets"), "--buckets");
  opt.budget = cli.get("--budget");
  opt.time_limit_s = cli.given("--time-limit") ? cli.get_double("--time-limit") : emu ? 0 : 570;
  opt.tune = tune_options(cli, emu);
  opt.tune.flush = !emu && !cli.get_flag("--no-flush");
  const int cores = int(std::thread::hardware_concurrency());
  opt.compile_threads = cli.given("--compile-threads") ? int(cli.get_int_as<int>("--compile-threads"))
                                                       : emu ? 0 : std::max(1, cores - 2);
  opt.quiet = cli.get_flag("--quiet");
  opt.baselines = !emu && !cli.get_flag("--no-baselines");
  opt.predequantize = cli.get_flag("--predequantize");
  opt.store_dispatch = !experiments;

  const std::vector<GpuJob> jobs = experiments ? read_experiment_jobs(cli.get("--points"), device, target_sm)
                                               : plan_gpu_jobs(mf->config(), &mf->weights(), opt);
  if (cli.get_flag("--dry-run")) {
    int64_t candidates = 0;
    std::map<std::string, std::pair<int, int64_t>> per_family;  // jobs, candidates
    for (const GpuJob& j : jobs) {
      std::printf("job %-28s %-20s budget %lld\n", j.family->name().c_str(), shape_text(j.shape).c_str(),
                  (long long)j.budget);
      for (const std::string& t : j.listed_text) std::printf("  point %s\n", t.c_str());
      candidates += j.budget;
      per_family[j.family->name()].first += 1;
      per_family[j.family->name()].second += j.budget;
    }
    for (const auto& [name, n] : per_family)
      std::printf("family %-28s %4d jobs, up to %5lld candidates\n", name.c_str(), n.first, (long long)n.second);
    std::printf("plan: %zu jobs, up to %lld candidates%s\n", jobs.size(), (long long)candidates,
                opt.time_limit_s > 0 ? (", fitted to --time-limit " + std::to_string(int(opt.time_limit_s)) + " s").c_str() : "");
    return 0;
  }
  // The device first, in a worker (this process never loads the CUDA driver), and the store only once there
  // is one: a machine without a GPU is left no empty store behind.
  Worker worker(self_command({"worker"}));
  DeviceFingerprint dev;
  try {
    dev = worker_device_fingerprint(worker, device, target_sm);
  } catch (const Error& e) {
    if (emu || experiments || e.exit_code() != kExitUnavailable) throw;
    const int rc = static_step();
    if (rc != 0) return rc;
    std::fflush(stdout);
    std::fprintf(stderr, "qtune: %s; printed the static compile-and-prune table for %s only, nothing was tuned\n",
                 e.what(), arch.c_str());
    return kExitUnavailable;
  }
  if (!emu && dev.arch != "sm_" + std::to_string(target_sm))
    throw Error("--gpu " + arch + ": the GPU here is " + dev.name + " (" + dev.arch + "); tune for it with --gpu sm" +
                    dev.arch.substr(3),
                kExitUnavailable);
  StoreOptions store_options;
  store_options.force_write = cli.get_flag("--force-write");
  Store store(cli.get("--cache"), store_options);
  store.check_writable();

  int64_t evals = 0;
  for (const GpuJob& j : jobs) evals += j.budget;
  std::fprintf(stderr, "qtune: %zu (family, shape, batch) jobs on %s (%s), up to %lld candidates, %d compile threads, "
               "store %s\n", jobs.size(), dev.name.c_str(), dev.arch.c_str(), (long long)evals, opt.compile_threads,
               store.path().c_str());
  const GpuTuningResult res = tune_gpu_jobs(jobs, store, worker, dev, opt, run_id());

  std::printf("%-22s %-18s %6s  %-55s %-16s %s\n", "family", "shape", "evals", "best point", "median", "model rank corr");
  std::vector<double> correlations;
  for (size_t i = 0; i < res.reports.size(); ++i) {
    const TuneReport& r = res.reports[i];
    const double rho = res.model_rank_correlation[i];
    if (std::isfinite(rho)) correlations.push_back(rho);
    std::printf("%-22s %-18s %6lld  %-55s %-16s %s\n", jobs[i].family->name().c_str(), shape_text(r.shape).c_str(),
                (long long)r.evaluations,
                r.best_point ? r.best_point->dump().c_str() : r.evaluations == 0 ? "(not started)" : "(none valid)",
                !r.best_point ? "-" : emu ? "(emu: verified)" : (std::to_string(r.best_stats.median * 1e6) + " us").c_str(),
                std::isfinite(rho) ? std::to_string(rho).substr(0, 5).c_str() : "-");
  }
  if (!correlations.empty()) {
    double mean = 0;
    for (double c : correlations) mean += c / double(correlations.size());
    std::printf("roofline model: mean Spearman rank correlation %.2f with the measured times over %zu jobs with 3 or "
                "more verified points%s\n", mean, correlations.size(), emu ? " (emulator times: not meaningful)" : "");
  }
  for (const std::string& line : res.dispatch_lines) std::printf("dispatch: %s\n", line.c_str());
  if (experiments)
    for (const std::string& line : experiment_lines(jobs, store, dev, !emu)) std::printf("%s\n", line.c_str());
  std::string counts;
  for (const auto& [k, v] : res.statuses) counts += (counts.empty() ? "" : ", ") + k + " " + std::to_string(v);
  std::printf("summary: %lld candidates measured, %lld resumed from the store (%s), worker processes started %d, "
              "%.1f s; winners in %s\n",
              (long long)res.measured, (long long)res.resumed, counts.c_str(), worker.spawned(), res.seconds,
              store.path().c_str());
  std::printf("time: %s\n", res.accounting.text(res.seconds).c_str());
  if (res.unfinished_jobs > 0)
    std::printf("time limit: %d of %zu jobs were not started within --time-limit %.0f s; the same command resumes "
                "with them\n", res.unfinished_jobs, jobs.size(), opt.time_limit_s);
  return 0;
}

}  // namespace

int tune_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune", "Tunes the kernels a model needs and writes the winners to the results store.");
  cli.option("--device", "D", "cpu (measured here), cuda (needs a GPU), emu (correctness only)", "cpu")
      .option("--model", "FILE", "model file (ajc1, moe3, ak48): tune every matvec shape it needs")
      .option("--shape", "N,K,G", "tune one matvec shape instead of a model's")
      .option("--type", "T", "weight type for --shape: q8_0, int8_sym, int8_asym, awq_int4", "q8_0")
      .option("--family", "F", "emu: GPU kernel family from kernels_src/registry (awq_gemv, ...)")
      .option("--gpu", "smXX", "target GPU architecture (e.g. sm86): with --model, tune every family, shape and batch "
              "bucket on that GPU (--device emu: on the emulator); with --family, prune points statically for it")
      .option("--cache", "FILE", "results store (SQLite); qrun --tuned-cache reads it", "qtune-cache.sqlite")
      .option("--strategy", "S", "search strategy (exhaustive, random, genetic, annealing, ils, bandit, best)", "best")
      .option("--budget", "B", "evaluations per shape, or a share of each space (25%)", "24")
      .option("--seed", "N", "search seed", "1").range(flag_ranges::kSeed)
      .option("--timeout", "SECONDS", "per-candidate limit; the worker is killed past it (default 20, emu 300)")
      .range(flag_ranges::kCandidateTimeoutSeconds)
      .option("--min-reps", "N", "timed repetitions at least", "5").range(flag_ranges::kRepetitions)
      .option("--min-time", "SECONDS", "timed time at least per candidate", "0.01")
      .range(flag_ranges::kMinTimeSeconds)
      .flag("--flush", "overwrite twice the last-level cache before every timed repetition")
      .flag("--no-racing", "time every candidate fully even when clearly slower than the best")
      .flag("--no-transfer", "do not start from the store's results of the same family on other devices")
      .option("--static", "FILE", "a `qtune static --json` report: registers, spills, shared memory and occupancy "
              "per point guide the model-based search (features; spilling points left out of its first picks)")
      .option("--families", "F,F", "--gpu: only these device families (registry names), or `all`; default: those the "
              "runtime dispatches for the model in its default weight layouts")
      .option("--buckets", "M,M", "--gpu: batch sizes M to tune batched families at (default 1,2,4,...,4096)")
      .list_range(flag_ranges::kBatchRows)
      .option("--time-limit", "SECONDS", "--gpu: the whole run's time; job budgets shrink to fit it, down to each "
              "family's default points, and jobs not reached are left for the same command to resume (default 570 "
              "on cuda, none on emu; 0: none)")
      .range(flag_ranges::kRunTimeLimitSeconds)
      .option("--compile-threads", "N", "--gpu: NVRTC threads compiling ahead of the measurements (default: cores - 2 "
              "on cuda, 0 on emu)")
      .range(flag_ranges::kCompileThreads)
      .option("--points", "FILE", "--gpu: measure the points an experiments file lists (tuner/flow/experiments.h), "
              "not a model's search; no --model")
      .flag("--dry-run", "--gpu: print the jobs (family, shape, budget) the run would tune, and stop")
      .flag("--static-only", "--gpu: print the static compile-and-prune table only, even where a GPU is present")
      .flag("--no-flush", "--gpu on cuda: do not overwrite the L2 between timed repetitions")
      .flag("--no-baselines", "--gpu on cuda: do not time cuBLASLt (fp16, and AWQ dequant + fp16) beside the linear "
            "families; the dispatch then chooses among our kernels only")
      .flag("--predequantize", "--gpu: also tune every quantized linear shape as fp16 (our fp16 kernels and "
            "cuBLASLt), the dispatch qrun --predequantize uses")
      .flag("--quiet", "no progress line")
      .flag("--force-write", "write results even into a store SQLite reports malformed");
  if (!cli.parse(args)) return 0;

  std::string device = cli.get("--device");
  int target_sm = 0;
  if (cli.given("--gpu")) {
    // An architecture this build knows (its limits and its NVRTC target), as qtune static requires.
    try {
      target_sm = compile::parse_arch(cli.get("--gpu"));
    } catch (const Error& e) {
      throw Error(std::string("--gpu: ") + e.what());
    }
  }
  // `--gpu` without --family: the whole model on a GPU (or, with --device emu, the same flow on the emulator).
  if (cli.given("--points") && !cli.given("--gpu")) throw Error("--points needs --gpu smNN");
  if (cli.given("--points") && cli.given("--family"))
    throw Error("--points names its families in the file: drop --family");
  if (cli.given("--gpu") && !cli.given("--family")) {
    if (device != "emu" && device != "cuda" && cli.given("--device"))
      throw Error("--gpu tunes on --device cuda (the default) or emu, not " + device);
    return gpu_flow(cli, device == "emu" ? "emu" : "cuda", target_sm);
  }
  if (device == "cuda") {
    // Asked of a worker: this process never loads the CUDA driver.
    Worker worker(self_command({"worker"}));
    const DeviceFingerprint gpu = worker_device_fingerprint(worker, "cuda", 0);  // exit 3 with the reason
    throw Error("--device cuda tunes a model's kernels on " + gpu.name + ": give --model X.bin --gpu " +
                "sm" + gpu.arch.substr(gpu.arch.rfind('_') + 1));
  }
  if (device == "replay") throw Error("the replay device is `qtune replay --space FILE ...`");
  if (device != "cpu" && device != "emu") throw Error("unknown --device '" + device + "' (cpu, cuda, emu)");
  const bool emu = device == "emu";

  // Jobs: (family, shape, what).
  struct Job {
    std::shared_ptr<Tunable> family;
    std::vector<int64_t> shape;
    std::string what;
  };
  std::vector<Job> jobs;
  if (emu) {
    if (!cli.given("--family")) throw Error("--device emu needs --family (GPU kernel family, e.g. awq_gemv)");
    auto fam = find_family("emu." + cli.get("--family"), target_sm);
    if (cli.given("--model")) {
      auto mf = ModelFile::open(cli.get("--model"));
      for (auto& s : device_model_shapes(cli.get("--family"), *mf)) jobs.push_back({fam, s, "model"});
      if (jobs.empty()) throw Error(cli.get("--model") + ": family " + cli.get("--family") + " serves no shape of it");
    } else if (cli.given("--shape")) {
      auto s = parse_int_list(cli.get("--shape"), "--shape");
      fam->family().shape(s);  // a wrong count of dimensions is an error naming the ones the family takes
      jobs.push_back({fam, s, "--shape"});
    } else {
      throw Error("give --model X.bin or --shape M,N,K,G");
    }
  } else {
    std::vector<MatvecShape> shapes;
    if (cli.given("--model")) {
      auto mf = ModelFile::open(cli.get("--model"));
      shapes = model_matvec_shapes(mf->weights());
      if (shapes.empty()) throw Error(cli.get("--model") + ": no quantized matvec weights to tune");
    } else if (cli.given("--shape")) {
      auto s = parse_int_list(cli.get("--shape"), "--shape");
      if (s.size() != 3) throw Error("--shape must be N,K,G");
      shapes.push_back({parse_type(cli.get("--type")), s, "--shape"});
    } else {
      throw Error("give --model X.bin or --shape N,K,G");
    }
    for (const auto& s : shapes) jobs.push_back({find_family("cpu." + matvec_family_name(s.type)), s.shape, s.what});
  }

  TuneOptions opt = tune_options(cli, emu);
  opt.flush = cli.get_flag("--flush");
  std::string budget_text = cli.get("--budget");

  StoreOptions store_options;
  store_options.force_write = cli.get_flag("--force-write");
  Store store(cli.get("--cache"), store_options);
  store.check_writable();  // refuse before tuning, not after the measurements are done
  DeviceFingerprint dev = cpu_fingerprint();
  if (emu) dev = qt::winners::emu_fingerprint();
  std::string run = run_id();
  Worker worker(self_command({"worker"}));

  std::optional<nlohmann::json> static_report;
  if (auto path = cli.get_optional("--static")) {
    std::ifstream f(*path);
    if (!f) throw Error(*path + ": cannot open the static report");
    static_report = nlohmann::json::parse(f, nullptr, false);
    if (static_report->is_discarded()) throw Error(*path + ": the static report is not valid JSON");
  }

  int64_t total_evals = 0;
  std::vector<int64_t> budgets;
  for (const auto& j : jobs) {
    size_t n = j.family->space(j.shape).size();
    if (n == 0) throw Error(j.family->name() + ": no valid point for shape " + shape_text(j.shape));
    int64_t b = std::min<int64_t>(parse_eval_budget(budget_text, n), int64_t(n));
    budgets.push_back(b);
    total_evals += b;
  }
  std::fprintf(stderr, "qtune: %zu shapes on %s, %lld candidate evaluations, store %s\n", jobs.size(),
               dev.name.c_str(), (long long)total_evals, store.path().c_str());
  Progress progress("tuning", double(total_evals), "candidates", cli.get_flag("--quiet"));
  int64_t done = 0;
  std::vector<TuneReport> reports;
  std::map<std::string, int> totals;
  TuneAccounting accounting;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& s = jobs[i];
    auto fam = s.family;
    opt.budget = Budget{budgets[i], -1};
    std::string label = fam->name() + " " + shape_text(s.shape);
    opt.knowledge = [&](const Space& space) {
      Knowledge k;
      if (!cli.get_flag("--no-transfer"))
        k = prior_from_store(store, space, dev, fam->name(), fam->source_hash(), fam->dtypes(), s.shape);
      if (static_report) {
        Knowledge st = static_knowledge(*static_report, fam->family().name, space);
        k.feature_names = std::move(st.feature_names);
        k.features = std::move(st.features);
      }
      size_t known = 0;
      for (double t : k.prior_time) known += std::isfinite(t);
      if (known > 0)
        std::fprintf(stderr, "qtune: %s: %zu points measured on %s start the search\n", label.c_str(), known,
                     k.prior_source.c_str());
      return k;
    };
    TuneReport rep = tune_shape(*fam, s.shape, worker, opt, [&](const nlohmann::json& point, const CandidateOutcome& o) {
      store.put(outcome_row(dev, *fam, s.shape, point, o, run));
      progress.update(double(++done), label);
    });
    for (const auto& [k, v] : rep.status_counts) totals[k] += v;
    accounting.add(rep);
    reports.push_back(std::move(rep));
  }
  progress.finish();
  std::printf("%-22s %-16s %8s %6s  %-55s %s\n", "family", "shape", "space", "evals", "best point", "median");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TuneReport& r = reports[i];
    std::printf("%-22s %-16s %8zu %6lld  %-55s %s\n", jobs[i].family->name().c_str(),
                shape_text(r.shape).c_str(), r.space_size, (long long)r.evaluations,
                r.best_point ? r.best_point->dump().c_str() : "(none valid)",
                !r.best_point ? "-" : emu ? "(emu: verified)" : (std::to_string(r.best_stats.median * 1e6) + " us").c_str());
  }
  std::string counts;
  for (const auto& [k, v] : totals) counts += (counts.empty() ? "" : ", ") + k + " " + std::to_string(v);
  std::printf("summary: %lld candidates (%s), worker processes started %d, %.1f s; winners in %s\n",
              (long long)done, counts.c_str(), worker.spawned(), progress.elapsed_seconds(), store.path().c_str());
  std::printf("time: %s\n", accounting.text(progress.elapsed_seconds()).c_str());
  return 0;
}

}  // namespace qt::tune
