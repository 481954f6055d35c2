// `qtune --device cpu --model X.bin`: derives the matvec shapes the model needs, tunes each on this
// machine's CPU in a crash-isolated worker, writes every measured candidate to the store, and prints the
// winners. `qtune --model X.bin --gpu sm86`: the same shapes for a GPU; without one, says so and runs the
// static compile-and-prune step only.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/progress.h"
#include "models/formats/model_file.h"
#include "tuner/cli/commands.h"
#include "device/winners/fingerprint.h"
#include "kernels_src/cpu_matvec/cpu_matvec_family.h"
#include "kernels_src/registry/registry.h"
#include "device/cuda/cuda_probe.h"
#include "tuner/family/candidate.h"
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

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

std::string run_id() { return "qtune-" + utc_timestamp(); }

}  // namespace

int tune_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune", "Tunes the kernels a model needs and writes the winners to the results store.");
  cli.option("--device", "D", "cpu (measured here), cuda (needs a GPU), emu (correctness only)", "cpu")
      .option("--model", "FILE", "model file (ajc1, moe3, ak48): tune every matvec shape it needs")
      .option("--shape", "N,K,G", "tune one matvec shape instead of a model's")
      .option("--type", "T", "weight type for --shape: q8_0, int8_sym, int8_asym, awq_int4", "q8_0")
      .option("--family", "F", "emu: GPU kernel family from kernels_src/registry (awq_gemv, ...)")
      .option("--gpu", "smXX", "target GPU architecture (e.g. sm86); with --device emu: prune points statically for it")
      .option("--cache", "FILE", "results store (SQLite); qrun --tuned-cache reads it", "qtune-cache.sqlite")
      .option("--strategy", "S", "search strategy (exhaustive, random, genetic, annealing, ils, bandit, best)", "best")
      .option("--budget", "B", "evaluations per shape, or a share of each space (25%)", "24")
      .option("--seed", "N", "search seed", "1")
      .option("--timeout", "SECONDS", "per-candidate limit; the worker is killed past it (default 20, emu 300)")
      .option("--min-reps", "N", "timed repetitions at least", "5")
      .option("--min-time", "SECONDS", "timed time at least per candidate", "0.01")
      .flag("--flush", "overwrite twice the last-level cache before every timed repetition")
      .flag("--no-racing", "time every candidate fully even when clearly slower than the best")
      .flag("--no-transfer", "do not start from the store's results of the same family on other devices")
      .option("--static", "FILE", "a `qtune static --json` report: registers, spills, shared memory and occupancy "
              "per point guide the model-based search (features; spilling points left out of its first picks)")
      .flag("--quiet", "no progress line")
      .flag("--force-write", "write results even into a store SQLite reports malformed");
  if (!cli.parse(args)) return 0;

  std::string device = cli.get("--device");
  int target_sm = 0;
  if (cli.given("--gpu") && device == "emu") {
    std::string arch = cli.get("--gpu");
    if (arch.rfind("sm", 0) == 0) arch = arch.substr(arch[2] == '_' ? 3 : 2);
    target_sm = int(parse_int(arch, "--gpu"));
    if (target_sm < 50 || target_sm > 200) throw Error("--gpu must name an architecture like sm86");
  }
  if (cli.given("--gpu") && device != "emu") {
    std::string arch = cli.get("--gpu");
    if (!cli.given("--model")) throw Error("--gpu needs --model X.bin");
    auto mf = ModelFile::open(cli.get("--model"));
    auto shapes = model_matvec_shapes(mf->weights());
    std::printf("model %s needs %zu matvec shapes:\n", cli.get("--model").c_str(), shapes.size());
    for (const auto& s : shapes)
      std::printf("  %-18s %-10s %s\n", shape_text(s.shape).c_str(), weight_type_name(s.type), s.what.c_str());
    // The GPU kernel families' own shape lists (registry model_shapes: GEMV for decode, GEMM for prefill).
    for (const std::string& fam : family_names("emu")) {
      std::string reg = fam.substr(4);
      auto gs = device_model_shapes(reg, *mf);
      std::printf("GPU family %-14s %zu shapes%s", reg.c_str(), gs.size(), gs.empty() ? " (does not serve this model)\n" : ":");
      for (const auto& s : gs) std::printf(" %s", shape_text(s).c_str());
      if (!gs.empty()) {
        std::string dims;
        for (const std::string& d : qt::kernels::find_family(reg).dims) dims += (dims.empty() ? "" : " x ") + d;
        std::printf("  (%s)\n", dims.c_str());
      }
    }
    CudaProbe probe = probe_cuda();
    if (!probe.available) {
      std::printf("no GPU: %s; running the static compile-and-prune step for %s only\n", probe.reason.c_str(),
                  arch.c_str());
      std::fflush(stdout);
      return static_command({"--gpu", arch, "--model", cli.get("--model")});
    }
    std::printf("GPU found: %s; running the static compile-and-prune step for %s (timing on the GPU is done by the "
                "cuda device of the runtime, not in this build)\n",
                probe.reason.c_str(), arch.c_str());
    std::fflush(stdout);
    return static_command({"--gpu", arch, "--model", cli.get("--model")});
  }
  if (device == "cuda") {
    CudaProbe probe = probe_cuda();
    if (!probe.available) throw Error("cuda device unavailable: " + probe.reason, kExitUnavailable);
    throw Error("cuda device: GPU '" + probe.reason + "' found, but CUDA timing of kernel families is not part of "
                "this build; use --gpu smXX for the static step", kExitUnavailable);
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

  TuneOptions opt;
  opt.strategy = cli.get("--strategy");
  make_strategy(opt.strategy);
  opt.seed = cli.get_int_as<uint64_t>("--seed");
  opt.timeout_s = cli.given("--timeout") ? cli.get_double("--timeout") : emu ? 300.0 : 20.0;
  if (!(opt.timeout_s > 0)) throw Error("--timeout must be positive");
  opt.measure.min_reps = cli.get_int_as<int>("--min-reps");
  if (opt.measure.min_reps < 1 || opt.measure.min_reps > 100000) throw Error("--min-reps must be in 1..100000");
  opt.measure.max_reps = std::max(opt.measure.max_reps, opt.measure.min_reps);
  opt.measure.min_seconds = cli.get_double("--min-time");
  if (opt.measure.min_seconds < 0 || opt.measure.min_seconds > 3600) throw Error("--min-time must be in 0..3600 seconds");
  opt.measure.racing = !cli.get_flag("--no-racing");
  opt.flush = cli.get_flag("--flush");
  if (emu) {  // correctness only: one verified run per point, emulator time means nothing
    opt.measure.warmup = 0;
    opt.measure.min_reps = opt.measure.max_reps = 1;
    opt.measure.min_seconds = 0;
    opt.measure.racing = false;
  }
  std::string budget_text = cli.get("--budget");

  StoreOptions store_options;
  store_options.force_write = cli.get_flag("--force-write");
  Store store(cli.get("--cache"), store_options);
  store.check_writable();  // refuse before tuning, not after the measurements are done
  DeviceFingerprint dev = cpu_fingerprint();
  if (emu) dev = qt::winners::emu_fingerprint();
  std::string run = run_id();
  Worker worker(handle_candidate_request);

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
      ResultRow row;
      row.device = dev;
      row.family = fam->name();
      row.source_hash = fam->source_hash();
      row.shape = s.shape;
      row.dtypes = fam->dtypes();
      row.point = point;
      row.status = o.status;
      row.stats = o.stats;
      row.detail = o.detail;
      row.run_id = run;
      store.put(row);
      progress.update(double(++done), label);
    });
    for (const auto& [k, v] : rep.status_counts) totals[k] += v;
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
  return 0;
}

}  // namespace qt::tune
