// qbench: prefill and decode speed of the runtime on a model file (or a synthetic model of a real Qwen3 shape
// it creates), and decode speed as a fraction of the memory-bandwidth roofline measured in the same process:
// roofline tok/s = measured read bandwidth / weight bytes one decode step reads. --report DIR measures a whole
// report instead (report_measure.h: every linear shape against cuBLAS and FP16, an MoE model's grouped expert
// GEMMs against its experts one by one on cuBLAS (report_moe.h), attention decode (report_attention.h), a launch's
// own cost (report_launch.h), and end to end per variant)
// and renders it (runtime/report/bench_report.h); --render FILE --report DIR renders a recorded one.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/cpu_info.h"
#include "common/cpu_steal.h"
#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/number_format.h"
#include "common/progress.h"
#include "common/sample_stats.h"
#include "device/arch/arch_limits.h"
#include "models/core/config_limits.h"
#include "models/formats/model_file.h"
#include "models/synthetic/presets.h"
#include "models/synthetic/synthetic.h"
#include "device/winners/fingerprint.h"
#include "runtime/cli/bandwidth.h"
#include "runtime/cli/report_measure.h"
#include "runtime/cli/report_attention.h"
#include "runtime/cli/report_launch.h"
#include "runtime/cli/report_moe.h"
#include "runtime/cli/run_device.h"
#include "runtime/cli/tuned_cache.h"
#include "runtime/cpu/amx_support.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/report/bench_report.h"
#include "runtime/model/qwen3_model.h"

namespace {

using namespace qt;
using namespace qt::rt;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

WeightType expert_type_of(const std::string& s) {
  if (const auto t = quantized_type_by_option_name(s)) return *t;
  throw Error("--expert-type: unknown type '" + s + "' (q8_0, int8-sym, int8-asym, awq)");
}

// Creates the synthetic model file the flags describe, unless it is already there. `format`, when given,
// overrides --format (a report's Q8_0 companion of an AWQ model); `expert` likewise --expert-type.
std::string synthetic_model(const CliArgs& cli, std::optional<FileFormat> format = std::nullopt,
                            std::optional<WeightType> expert = std::nullopt) {
  ModelConfig c = synthetic::preset_config(cli.get("--preset"));
  if (cli.given("--layers")) c.n_layers = cli.get_int_as<int32_t>("--layers");
  WriterOptions o;
  o.config = c;
  o.format = c.is_moe() ? FileFormat::MOE3 : FileFormat::AJC1;
  if (cli.given("--format")) o.format = parse_file_format(cli.get("--format"));
  if (cli.given("--expert-type")) o.expert_type = expert_type_of(cli.get("--expert-type"));
  if (format) o.format = *format;
  if (expert) o.expert_type = *expert;
  const std::string dir = cli.get("--work-dir");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error("--work-dir " + dir + ": cannot make it a folder for the synthetic model (" +
                (ec ? ec.message() : std::string("a file is in the way")) + ")");
  const std::string path = dir + "/" + cli.get("--preset") + "-L" + std::to_string(c.n_layers) + "-" +
                           file_format_name(o.format) + "-" + weight_type_name(o.expert_type) + ".bin";
  if (std::filesystem::exists(path)) return path;
  std::fprintf(stderr, "qbench: creating %s (synthetic, seed 1)\n", path.c_str());
  synthetic::write_model_file(path + ".tmp", o, 1, false);
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

// "AWQ", "Q8_0", ...: how a report names a model variant by the weight type of its linear layers.
std::string type_label(WeightType t) {
  switch (t) {
    case WeightType::AWQ_INT4: return "AWQ";
    case WeightType::Q8_0: return "Q8_0";
    case WeightType::INT8_GW_SYM: return "INT8 sym";
    case WeightType::INT8_GW_ASYM: return "INT8 asym";
    default: return weight_type_name(t);
  }
}


// The --q8-model companion: Q8_0 weights of the same shape, or its rows and goals would compare unlike things.
void check_q8_companion(const std::string& path, const ModelWeights& w) {
  const auto q8 = ModelFile::open(path);
  const WeightType t = model_linear_type(q8->weights());
  if (t != WeightType::Q8_0)
    throw Error("--q8-model " + path + ": its linear weights are " + weight_type_name(t) + ", not Q8_0");
  const ModelConfig &a = w.config, &b = q8->config();
  const std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> dims = {
      {"layers", {a.n_layers, b.n_layers}},   {"hidden size", {a.dim, b.dim}},
      {"heads", {a.n_heads, b.n_heads}},      {"KV heads", {a.n_kv_heads, b.n_kv_heads}},
      {"head dim", {a.head_dim, b.head_dim}}, {"MLP width", {a.hidden_dim, b.hidden_dim}},
      {"experts", {a.num_experts, b.num_experts}}, {"vocabulary", {a.vocab_size, b.vocab_size}}};
  for (const auto& [what, v] : dims)
    if (v.first != v.second)
      throw Error("--q8-model " + path + ": " + what + " " + std::to_string(v.second) + ", where the model has " +
                  std::to_string(v.first) + ": not the same shape");
}

// The whole report: kernels per linear shape, the bandwidth, end to end per variant; then REPORT.md.
int run_report(const CliArgs& cli, int argc, char** argv, const std::string& path) {
  const std::string device = cli.get("--device");
  if (device != "cpu" && device != "emu" && device != "cuda")
    throw Error("--device: unknown device '" + device + "' (cpu, emu, cuda)");
  const auto file = ModelFile::open(path);
  const ModelWeights& w = file->weights();
  const ModelConfig& c = file->config();
  const std::string cache = cli.given("--tuned-cache") ? cli.get("--tuned-cache") : "";
  KernelBenchOptions ko;
  ko.tuned_cache = cache;
  if (cli.given("--buckets")) ko.buckets = parse_int_list(cli.get("--buckets"), "--buckets");
  EndToEndOptions eo;
  if (cli.given("--prompts")) eo.prompts = parse_int_list(cli.get("--prompts"), "--prompts");
  eo.decode_steps = cli.given("--gen") ? cli.get_int("--gen") : 128;
  eo.repeat = int(cli.get_int("--repeat"));

  nlohmann::json data = {{"schema", report::kReportSchema}, {"generated", utc_now()}, {"command", command_line(argc, argv)}};
  data["model"] = {{"path", path}, {"arch", c.is_moe() ? "qwen3-moe" : "qwen3"}, {"layers", c.n_layers},
                   {"weight_type", weight_type_name(model_linear_type(w))}};
  data["tuned_cache"] = cache.empty() ? nlohmann::json() : nlohmann::json(cache);
  nlohmann::json notes = nlohmann::json::array();
  nlohmann::json e2e = nlohmann::json::array();
  const uint64_t decode_bytes = decode_weight_bytes(w);
  // The companion Q8_0 model of the same shape, for the end-to-end comparison.
  std::string q8_path = cli.given("--q8-model") ? cli.get("--q8-model") : "";
  if (q8_path.empty() && !cli.given("--model") && model_linear_type(w) != WeightType::Q8_0)
    q8_path = c.is_moe() ? synthetic_model(cli, std::nullopt, WeightType::Q8_0) : synthetic_model(cli, FileFormat::AJC1);
  if (cli.given("--q8-model")) check_q8_companion(q8_path, w);
  const std::string label = type_label(model_linear_type(w));
  const std::string dir = cli.get("--report");
  // What is measured so far, written after each section: a run stopped by its time limit (a GPU lent for
  // minutes) still leaves its measurements, marked incomplete at the top of the notes. The last write is the
  // whole report.
  auto checkpoint = [&](const std::string& done) {
    nlohmann::json partial = data;
    partial["end_to_end"] = e2e;
    nlohmann::json partial_notes = notes;
    partial_notes.insert(partial_notes.begin(), "INCOMPLETE: written after " + done +
                                                    "; the sections after it had not run (a finished run rewrites "
                                                    "this report)");
    partial["notes"] = partial_notes;
    report::write_report(report::report_from_json(partial, "the measured report so far"), dir);
  };

  RunDeviceOptions ro;
  ro.device = device;
  ro.emu_threads = cli.given("--threads") ? cli.get_int_as<int>("--threads") : 0;
  if (cli.given("--emu-arch") && device != "emu") throw Error("--emu-arch is an emulator option (--device emu)");
  if (cli.given("--attention-contexts") && device == "cpu")
    throw Error("--attention-contexts times the device's attention kernels (--device emu or cuda)");
  ro.emu_arch = compile::parse_arch(cli.get("--emu-arch"));
  if (ro.emu_arch < 80) throw Error("--emu-arch: the emulator presents sm80, sm86, sm89 or sm90, not " + cli.get("--emu-arch"));
  if (cli.given("--threads")) ro.cpu.threads = cli.get_int_as<int>("--threads");
  if (device == "cpu") {
    ThreadPool pool(CpuBackend(ro.cpu).threads());
    const uint64_t bw_bytes = uint64_t(cli.get_int_as<uint32_t>("--bandwidth-mb")) << 20;
    if (bw_bytes == 0) throw Error("--report needs the bandwidth measurement (--bandwidth-mb > 0)");
    const BandwidthResult bw = measure_bandwidth(pool, bw_bytes, 3);
    data["device"] = {{"kind", "cpu"}, {"name", winners::cpu_fingerprint().name},
                      {"fingerprint", winners::cpu_fingerprint().key()}, {"bandwidth_gbps", bw.read_gbps},
                      {"bandwidth_method", "STREAM-like read of " + std::to_string(bw_bytes >> 20) + " MiB with " +
                                               std::to_string(pool.threads()) + " threads, best of 3"}};
    data["kernels"] = bench_cpu_kernels(w, ko);
    checkpoint("the kernel rows");
    auto rss = [] { return double(peak_rss_bytes()) / 1e6; };
    auto cpu_variant = [&](const std::string& name, const std::string& p, const ModelWeights& mw, bool tuned) {
      CpuOptions o = ro.cpu;
      if (tuned) std::fprintf(stderr, "qbench: %s\n", apply_tuned_cache(cache, mw, o, cli.given("--threads")).c_str());
      CpuBackend b(o);
      e2e.push_back(bench_end_to_end(name, p, mw, b, eo, rss, decode_weight_bytes(mw)));
      checkpoint("the end-to-end variant '" + name + "'");
    };
    cpu_variant(label + " default", path, w, false);
    if (!cache.empty()) cpu_variant(label + " tuned", path, w, true);
    if (!q8_path.empty()) {
      const auto q8 = ModelFile::open(q8_path);
      cpu_variant("Q8_0", q8_path, q8->weights(), false);
    }
    notes.push_back("memory is the process's peak resident set (it includes the bandwidth buffer)");
    notes.push_back("the CPU has no FP16 or cuBLAS variant: its kernels are compared tuned against default");
  } else {
    RunDevice kd = make_run_device(ro);
    dev::Device& d = *kd.device;
    const std::string prefix = device + ".";
    const uint64_t bw_bytes = device == "emu" ? uint64_t(1) << 20 : uint64_t(1) << 30;
    const DeviceBandwidth bw = measure_device_bandwidth(d, bw_bytes);
    data["device"] = {{"kind", device}, {"name", d.name()}, {"fingerprint", d.store_fingerprint().key()},
                      {"bandwidth_gbps", bw.gbps}, {"bandwidth_method", bw.method}};
    // A launch's own cost in the stream, in a graph and with PDL: the static model's one fitted constant for a
    // decode step's launches, measured apart from the kernels around it. First: a second's work that a report
    // cut short by its time limit should not lose.
    data["launch_cost"] = bench_launch_cost(d, ko);
    checkpoint("the launch cost rows");
    data["kernels"] = bench_device_kernels(d, w, prefix, ko);
    checkpoint("the kernel rows");
    // The Q8_0 companion's linear shapes at one row too (issue 26 judges Q8_0 GEMVs on the large shapes): seconds
    // of timing, where its every bucket would double the kernel rows' time.
    // Opened once here: its kernel rows, then its end-to-end variant.
    const std::unique_ptr<ModelFile> q8 = q8_path.empty() ? nullptr : ModelFile::open(q8_path);
    if (q8) {
      KernelBenchOptions one_row = ko;
      one_row.buckets = {1};
      for (nlohmann::json& row : bench_device_kernels(d, q8->weights(), prefix, one_row))
        if (row.value("type", "") != "F16") data["kernels"].push_back(std::move(row));
      checkpoint("the Q8_0 model's kernel rows");
    }
    // An MoE model's grouped expert GEMMs at the same buckets, as tokens (issue 27's MoE goal).
    if (const nlohmann::json moe = bench_moe_grouped(d, w, prefix, ko); !moe.is_null()) {
      data["moe_grouped"] = moe;
      checkpoint("the MoE grouped GEMM rows");
    }
    // Flash-decoding at long contexts (issue 26's attention goal), on the model's heads.
    const std::vector<int64_t> contexts = cli.given("--attention-contexts")
                                              ? parse_int_list(cli.get("--attention-contexts"), "--attention-contexts")
                                              : default_attention_contexts(device == "emu");
    data["attention_decode"] = bench_attention_decode(d, w, prefix, ko, contexts);
    checkpoint("the attention decode rows");
    const int arch = d.arch();
    kd.backend.reset();  // the backend before its device
    kd.device.reset();
    auto device_variant = [&](const std::string& name, const std::string& p, const ModelWeights& mw, bool tuned,
                              bool predequantize, uint64_t bytes, bool pdl = false, bool fuse_norm = false,
                              bool graphs = true, bool prefill_f16 = false) {
      RunDeviceOptions o = ro;
      o.prefill_f16 = prefill_f16;
      o.graphs = graphs && ro.graphs;
      o.tuned_cache = tuned ? cache : "";
      o.predequantize = predequantize;
      o.programmatic_launch = pdl;
      o.fuse_norm = fuse_norm;
      // The tuned variant is what qrun --tuned-cache runs: the store's measured decode variant too, where this
      // variant does not name one itself.
      if (tuned && !pdl && !fuse_norm && graphs) o.stored_decode = decode_step_key(mw);
      RunDevice rd = make_run_device(o);
      DeviceBackend* db = rd.device_backend;
      e2e.push_back(bench_end_to_end(name, p, mw, *rd.backend, eo,
                                     [db] { return double(db->weight_bytes()) / 1e6; }, bytes));
      std::fprintf(stderr, "qbench: %s: %s\n", name.c_str(), device_report(rd).c_str());
      checkpoint("the end-to-end variant '" + name + "'");
    };
    // The variants that decide the decode defaults first, the FP16 one (the slowest to load: every weight
    // dequantized on the host) after them, so a report cut short by its time limit keeps what decides.
    device_variant(label + " default", path, w, false, false, decode_bytes);
    if (!cache.empty()) device_variant(label + " tuned", path, w, true, false, decode_bytes);
    // The runtime's variant again with programmatic dependent launch (sm_90+, qrun --pdl): what it hides of the
    // launch gaps between a step's kernels.
    if (device == "cuda" && arch >= 90)
      device_variant(label + (cache.empty() ? " default" : " tuned") + " + PDL", path, w, !cache.empty(), false,
                     decode_bytes, true);
    // And with the decode step's norms fused into the kernels beside them (qrun --fuse-norm): three launches fewer
    // per dense layer, on the stream GEMVs, whose first weight tiles load before the PDL wait; so on sm_90 with
    // PDL too, the configuration that would become Hopper's default (the variant above isolates PDL). A GPU's
    // figure decides; the emulator's report leaves it out (its tests run the fused step against the plain one).
    if (device == "cuda")
      device_variant(label + (cache.empty() ? " default" : " tuned") + " + fused norm" + (arch >= 90 ? " + PDL" : ""),
                     path, w, !cache.empty(), false, decode_bytes, arch >= 90, true);
    if (q8) device_variant("Q8_0", q8_path, q8->weights(), !cache.empty(), false, decode_weight_bytes(q8->weights()));
    device_variant("FP16", path, w, !cache.empty(), true, predequantized_decode_bytes(w, decode_bytes));
    // The runtime's variant with every decode kernel launched instead of replayed from the captured step: with
    // the launch rows, what the graph saves end to end. Late, so a report cut short loses only this and the copy's.
    if (device == "cuda")
      device_variant(label + (cache.empty() ? " default" : " tuned") + ", no graph", path, w, !cache.empty(), false,
                     decode_bytes, false, false, false);
    // The quantized weights with an fp16 copy beside for the prefill's GEMMs (qrun --prefill-f16): FP16's prefill
    // and the quantized decode, at the memory of both. A GPU only (the emulator has no cuBLASLt to run the copy
    // on), last: it holds the most, so a device that cannot hold it costs this row alone.
    if (device == "cuda") {
      const std::string name = label + (cache.empty() ? " default" : " tuned") + report::kPrefillCopySuffix;
      try {
        device_variant(name, path, w, !cache.empty(), false, decode_bytes, false, false, true, true);
      } catch (const Error& e) {
        e2e.push_back(nlohmann::json{{"name", name}, {"unavailable", e.what()}});
        std::fprintf(stderr, "qbench: %s: not measured: %s\n", name.c_str(), e.what());
      }
    }
    notes.push_back("FP16 is the same model with its dense weights dequantized to fp16 at load (qrun "
                    "--predequantize): GEMMs on cuBLASLt where available, else the fp16 kernel families");
    notes.push_back("memory is the weight bytes held on the device");
  }
  if (cache.empty()) notes.push_back("no --tuned-cache: the tuned rows are the default choices");
  data["end_to_end"] = e2e;
  data["notes"] = notes;
  // Checked as a recorded file would be: a figure out of its range is a measurement bug, not a report.
  report::write_report(report::report_from_json(data, "the measured report"), dir);
  std::printf("report written to %s/REPORT.md (%zu kernel rows, %zu end-to-end variants)\n", dir.c_str(),
              data["kernels"].size(), e2e.size());
  return 0;
}

// --isa: one of the instruction sets the fast path has kernels for, and that this CPU runs (checked before any
// model is made, so a typo costs nothing).
Isa parse_isa(const CliArgs& cli) {
  const std::string name = cli.get("--isa");
  Isa isa;
  if (!isa_from_name(name.c_str(), &isa))
    throw Error("--isa: expected avx512-vnni, avx-vnni, avx2 or scalar, got '" + name + "'");
  if (cli.get_flag("--reference")) throw Error("--isa chooses the fast path's kernels; the reference path has its own");
  if (!isa_supported(isa)) {
    std::string runs;
    for (Isa i : kAllIsas)
      if (isa_supported(i)) runs += std::string(runs.empty() ? "" : ", ") + isa_name(i);
    throw Error("--isa " + name + ": this CPU cannot run it (it runs " + runs + ")", kExitUnavailable);
  }
  return isa;
}

// What both measurements of --choose-decode start from: the store (whether it existed before the writability
// check makes an empty one), the model, and the prompt, checked against the model's context.
struct ChooseDecodeSetup {
  std::string store;
  bool had_store = false;
  std::unique_ptr<ModelFile> file;
  int64_t prompt = 0, gen = 0, repeat = 0, warmup = 0, context = 0;
  std::vector<int32_t> tokens;
};

ChooseDecodeSetup choose_decode_setup(const CliArgs& cli, const std::string& path) {
  ChooseDecodeSetup s;
  s.store = cli.get("--tuned-cache");
  s.had_store = std::filesystem::exists(s.store);
  check_decode_store_writable(s.store);
  s.file = ModelFile::open(path);
  const ModelConfig& c = s.file->config();
  s.prompt = cli.get_int("--prompt"), s.gen = cli.get_int("--gen"), s.repeat = cli.get_int("--repeat");
  s.warmup = cli.get_int("--warmup");
  s.context = s.prompt + s.gen + 1;
  if (s.context > c.max_seq_len)
    throw Error("--prompt " + std::to_string(s.prompt) + " and --gen " + std::to_string(s.gen) + " need a context of " +
                std::to_string(s.context) + " tokens, more than the model's maximum of " + std::to_string(c.max_seq_len));
  s.tokens = benchmark_prompt(s.prompt, c.vocab_size);
  return s;
}

// `steps` decode steps on benchmark_decode_token's tokens.
void decode_steps(Qwen3Model& model, int64_t steps, int64_t vocab) {
  for (int64_t i = 0; i < steps; ++i) {
    const int32_t tok = benchmark_decode_token(i, vocab);
    model.forward(&tok, 1, LogitsRows::kLast);
  }
}

const MeasuredVariant& fastest(const std::vector<MeasuredVariant>& measured) {
  return *std::min_element(measured.begin(), measured.end(), [](const MeasuredVariant& a, const MeasuredVariant& b) {
    return a.seconds_per_step < b.seconds_per_step;
  });
}

const char* prefetch_phrase(DecodePrefetch p) {
  return p == DecodePrefetch::kNone ? "no prefetch" : p == DecodePrefetch::kL1 ? "the prefetch into L1 (l1-prefetch)"
                                                                                 : "the prefetch (plain)";
}

// --choose-decode on the CPU: decode with the Q8_0 GEMM's prefetch into L2, without it, and with it into L1
// (q8_gemm_kernels_for), on one backend switched between them, in alternated rounds: a shared machine's speed
// drifts within minutes, and alternation spreads the drift over them all. The kernels are those qrun given the
// store would run (its ISA, threads and rows per work item).
int run_choose_decode_cpu(const CliArgs& cli, const ChooseDecodeSetup& s) {
  const ModelWeights& w = s.file->weights();
  const int64_t vocab = s.file->config().vocab_size;
  CpuOptions opts;
  if (cli.given("--threads")) opts.threads = cli.get_int_as<int>("--threads");
  opts.decode_prefetch = DecodePrefetch::kL2;  // each round sets it; the store's earlier ranking is not read
  std::string tuned = "no tuned kernels in the store";
  if (s.had_store) tuned = apply_tuned_cache(s.store, w, opts, cli.given("--threads"));
  CpuBackend backend(opts);
  Qwen3Model model(w, backend, s.context);
  const std::vector<DecodeVariant> variants = decode_variants("cpu", 0);
  std::vector<std::vector<double>> per_step(variants.size());
  for (int64_t r = 0; r < s.warmup + s.repeat; ++r)
    for (size_t v = 0; v < variants.size(); ++v) {
      backend.set_decode_prefetch(variants[v].prefetch);
      model.reset();
      model.forward(s.tokens, LogitsRows::kLast);
      const auto t0 = Clock::now();
      decode_steps(model, s.gen, vocab);
      if (r >= s.warmup) per_step[v].push_back(since(t0) / double(s.gen));
    }
  std::vector<MeasuredVariant> measured;
  for (size_t v = 0; v < variants.size(); ++v) {
    const double median = summarize(per_step[v]).median;
    measured.push_back({variants[v], median});
    std::printf("%-16s %9.1f us per step, %8.2f tok/s (median of %lld alternated runs of %lld steps after a "
                "%lld-token prompt)\n",
                variants[v].label().c_str(), median * 1e6, 1.0 / median, static_cast<long long>(s.repeat),
                static_cast<long long>(s.gen), static_cast<long long>(s.prompt));
  }
  std::fprintf(stderr, "qbench: %s; %s\n", backend.name().c_str(), tuned.c_str());
  store_decode_ranking(s.store, winners::cpu_fingerprint(), "cpu.", decode_step_key(w), measured);
  std::printf("stored in %s: qrun --tuned-cache %s runs this model's decode on this CPU with %s\n", s.store.c_str(),
              s.store.c_str(), prefetch_phrase(fastest(measured).variant.prefetch));
  return 0;
}

// --choose-decode: every decode variant the device runs (decode_choice.h: fused norms, PDL; the CPU's prefetch)
// timed on the model, the ranking stored in --tuned-cache, from which qrun then runs the fastest.
int run_choose_decode(const CliArgs& cli, const std::string& path) {
  const std::string device = cli.get("--device");
  if (device != "cpu" && device != "emu" && device != "cuda")
    throw Error("--device: unknown device '" + device + "' (cpu, emu, cuda)");
  if (!cli.given("--tuned-cache"))
    throw Error("--choose-decode keeps its ranking in the tuning store: give --tuned-cache FILE (made when missing)");
  if (cli.given("--report")) throw Error("--choose-decode and --report are two measurements: give one");
  const ChooseDecodeSetup s = choose_decode_setup(cli, path);
  if (device == "cpu") return run_choose_decode_cpu(cli, s);
  const std::string& store = s.store;
  const ModelWeights& w = s.file->weights();
  const int64_t vocab = s.file->config().vocab_size;
  RunDeviceOptions ro;
  ro.device = device;
  ro.emu_arch = compile::parse_arch(cli.get("--emu-arch"));
  if (ro.emu_arch < 80) throw Error("--emu-arch: the emulator presents sm80, sm86, sm89 or sm90, not " + cli.get("--emu-arch"));
  if (cli.given("--threads")) ro.emu_threads = cli.get_int_as<int>("--threads");
  // The kernels as the store tuned them, when it exists: the variants differ only in what this ranks.
  if (s.had_store) ro.tuned_cache = store;
  int arch = 0;
  winners::DeviceFingerprint fingerprint;
  {
    const RunDevice probe = make_run_device(ro);
    arch = probe.device->arch();
    fingerprint = probe.device->store_fingerprint();
  }
  std::vector<MeasuredVariant> measured;
  for (const DecodeVariant& v : decode_variants(device, arch)) {
    RunDeviceOptions o = ro;
    o.fuse_norm = v.fuse_norm;
    o.programmatic_launch = v.pdl;
    RunDevice rd = make_run_device(o);
    Qwen3Model model(w, *rd.backend, s.context);
    for (int64_t r = 0; r < s.warmup; ++r) {  // the first step captures the decode graph
      model.reset();
      model.forward(s.tokens, LogitsRows::kLast);
      decode_steps(model, 1, vocab);
    }
    std::vector<double> per_step;
    for (int64_t r = 0; r < s.repeat; ++r) {
      model.reset();
      model.forward(s.tokens, LogitsRows::kLast);
      const auto t0 = Clock::now();
      decode_steps(model, s.gen, vocab);
      per_step.push_back(since(t0) / double(s.gen));
    }
    const double median = summarize(per_step).median;
    measured.push_back({v, median});
    std::printf("%-16s %9.1f us per step, %8.2f tok/s (median of %lld runs of %lld steps after a %lld-token prompt)\n",
                v.label().c_str(), median * 1e6, 1.0 / median, static_cast<long long>(s.repeat),
                static_cast<long long>(s.gen), static_cast<long long>(s.prompt));
    std::fprintf(stderr, "qbench: %s: %s\n", v.label().c_str(), device_report(rd).c_str());
  }
  const DecodeStepKey key = decode_step_key(w);
  store_decode_ranking(store, fingerprint, device + ".", key, measured);
  const MeasuredVariant& best = fastest(measured);
  const std::string arch_flag = device == "emu" && arch != 80 ? " --emu-arch sm" + std::to_string(arch) : "";
  std::printf("stored in %s: qrun --device %s%s --tuned-cache %s runs this model's decode step as %s\n", store.c_str(),
              device.c_str(), arch_flag.c_str(), store.c_str(), best.variant.label().c_str());
  if (device == "emu")
    std::printf("note: the emulator's times say nothing of a GPU's; on emu this ranking only exercises the flow\n");
  return 0;
}

int run(int argc, char** argv) {
  CliArgs cli("qbench", "Measures prefill/decode tok/s of the CPU runtime and the decode memory-bandwidth roofline.");
  cli.option("-m,--model", "PATH", "model file to benchmark (else a synthetic --preset model is created)")
      .option("--preset", "NAME", "synthetic shape: qwen3-0.6b, qwen3-30b-a3b, ...", "qwen3-0.6b")
      .option("--layers", "N", "override the preset's layer count").range(limits::kLayersRange)
      .option("--format", "F", "ajc1, moe3 or ak48 (default: ajc1 dense, moe3 MoE)")
      .option("--expert-type", "T", "moe3 experts: q8_0, int8-sym, int8-asym, awq", "q8_0")
      .option("--work-dir", "DIR", "where synthetic models are created and kept", "/tmp/qbench-models")
      .option("--prompt", "N", "prompt tokens for the prefill measurement", "128").range(limits::kTokenCountRange)
      .option("--gen", "N", "decode steps measured after the prefill", "32").range(limits::kTokenCountRange)
      .option("--repeat", "R", "repetitions (best is reported)", "3").range(flag_ranges::kRepetitions)
      .option("--warmup", "W", "unmeasured runs of the prompt and one decode step first, as llama-bench does: the "
              "one-time work a first prompt pays (MoE experts repacked on first use, pages faulted in) is not "
              "counted", "1").range(flag_ranges::kWarmupRuns)
      .option("--threads", "N", "threads (default: all)").range(flag_ranges::kThreads)
      .flag("--reference", "benchmark the reference path instead of the fast one")
      .option("--bandwidth-mb", "MB", "buffer for the bandwidth measurement; 0 skips it (no roofline), so the peak RSS is the runtime's own", "512")
      .range(flag_ranges::kBufferMiB)
      .option("--context", "N", "KV-cache limit in tokens (default: prompt + gen + 1); the cache grows up to it as tokens come")
      .range(limits::kTokenCountRange)
      .option("--kv", "T", "fast path's KV-cache type: f16 or f32 (default: f16, f32 for MoE models)")
      .option("--isa", "I", "fast path's instruction set: avx512-vnni, avx-vnni, avx2 or scalar, one this CPU runs "
              "(default: the fastest it runs): what a CPU with only that set gets from the same binary")
      .option("--tiles", "U", "fast path's matrix unit for prefill: amx, none, or amx-model (the AMX kernel "
              "through the scalar model of the tile instructions: slow, for checking) (default: amx where usable)")
      .flag("--json", "print one JSON object instead of text")
      .option("--device", "D", "cpu, emu or cuda (the device backend; cuda needs a GPU)", "cpu")
      .option("--tuned-cache", "FILE", "qtune's store: the tuned choices (cpu: matvec rows; emu/cuda: kernel points)")
      .flag("--choose-decode", "time every decode variant the device runs (emu/cuda: plain, fused norms, and with "
            "PDL on sm_90+; cpu: the Q8_0 decode's prefetch into L2, none, into L1) on the model, --gen steps after a "
            "--prompt prefill, median of --repeat, and store the ranking in --tuned-cache (made when missing): qrun given "
            "that store runs the fastest")
      .option("--emu-arch", "ARCH", "--report on emu: the architecture the emulator presents, sm80, sm86, sm89 or sm90 "
              "(sm90 runs the sm_90a families, the Hopper grouped MoE GEMMs among them)", "sm80")
      .option("--report", "DIR", "measure a whole report (kernels per linear shape and batch against cuBLAS and "
              "FP16, end to end per variant) and write DIR/REPORT.md, report.json and plots/")
      .option("--render", "FILE", "with --report DIR: render a recorded report.json instead of measuring")
      .option("--buckets", "LIST", "--report: batch rows per linear call (default 1,2,4,...,4096)")
      .list_range(flag_ranges::kBatchRows)
      .option("--prompts", "LIST", "--report: prompt lengths for the end-to-end prefill (default 128,512)")
      .list_range(limits::kTokenCountRange)
      .option("--attention-contexts", "LIST", "--report on emu/cuda: contexts at which attention decode is timed "
              "(default 4096,32768 on a GPU, 64 on the emulator)")
      .list_range(limits::kTokenCountRange)
      .option("--q8-model", "PATH", "--report: a Q8_0 model of the same shape for the end-to-end comparison "
              "(with --preset, made automatically)");
  if (!cli.parse(argc, argv)) return 0;
  if (cli.given("--render")) {
    if (!cli.given("--report")) throw Error("--render FILE needs --report DIR (where to write the report)");
    report::write_report(report::read_report_file(cli.get("--render")), cli.get("--report"));
    std::printf("report written to %s/REPORT.md\n", cli.get("--report").c_str());
    return 0;
  }
  const int64_t prompt = cli.get_int("--prompt"), gen = cli.get_int("--gen"), repeat = cli.get_int("--repeat");
  const int64_t warmup = cli.get_int("--warmup");

  // Options of one measurement given to another would be silently ignored.
  const bool report = cli.given("--report"), choose = cli.get_flag("--choose-decode");
  for (const char* o : {"--buckets", "--prompts", "--attention-contexts", "--q8-model"})
    if (cli.given(o) && !report) throw Error(std::string(o) + " applies only with --report");
  if (cli.given("--emu-arch") && !report && !choose)
    throw Error("--emu-arch applies only with --report or --choose-decode on --device emu");
  if (choose)
    for (const char* o : {"--json", "--kv", "--isa", "--tiles", "--bandwidth-mb", "--reference", "--context"})
      if (cli.given(o)) throw Error(std::string(o) + " does not apply to --choose-decode");
  if (report && cli.given("--json")) throw Error("--json applies to a plain run; --report writes DIR/report.json");
  for (const char* o : {"--isa", "--tiles"})
    if (report && cli.given(o)) throw Error(std::string(o) + " chooses the CPU's kernels for a plain run, not for --report");
  const std::optional<Isa> asked_isa = cli.given("--isa") ? std::optional<Isa>(parse_isa(cli)) : std::nullopt;
  if (cli.given("--report") && !cli.given("--format") && !cli.given("--model") && cli.get("--device") != "cpu" &&
      !synthetic::preset_config(cli.get("--preset")).is_moe())
    return run_report(cli, argc, argv, synthetic_model(cli, FileFormat::AK48));  // the device report is AWQ's
  // These describe the synthetic model qbench makes; with a model file they would be silently ignored.
  if (cli.given("--model"))
    for (const char* o : {"--preset", "--layers", "--format", "--expert-type", "--work-dir"})
      if (cli.given(o)) throw Error(std::string(o) + " describes the synthetic model qbench makes; --model gives a file");
  const std::string path = cli.given("--model") ? cli.get("--model") : synthetic_model(cli);
  if (cli.get_flag("--choose-decode")) return run_choose_decode(cli, path);
  if (cli.given("--report")) return run_report(cli, argc, argv, path);
  if (cli.get("--device") != "cpu")
    throw Error("--device " + cli.get("--device") + " measures with --report DIR (qrun --device runs a model)");
  const auto file = ModelFile::open(path);
  const ModelConfig& c = file->config();
  CpuOptions opts;
  opts.reference = cli.get_flag("--reference");
  if (cli.given("--threads")) opts.threads = cli.get_int_as<int>("--threads");
  if (cli.given("--kv")) {
    const std::string kv = cli.get("--kv");
    if (kv != "f16" && kv != "f32") throw Error("--kv: expected f16 or f32, got '" + kv + "'");
    opts.kv_cache = kv == "f16" ? ActType::F16 : ActType::F32;
  }
  if (cli.given("--tiles")) {
    const std::string t = cli.get("--tiles");
    std::optional<TileUnit> unit;
    for (TileUnit u : {TileUnit::kNone, TileUnit::kAmx, TileUnit::kAmxModel})
      if (t == tile_unit_name(u)) unit = u;
    if (!unit) throw Error("--tiles: expected amx, none or amx-model, got '" + t + "'");
    opts.tiles = unit;
  }
  // The CPU winners of a `qtune --device cpu` store, as qrun --tuned-cache applies them.
  if (cli.given("--tuned-cache")) {
    if (opts.reference) throw Error("--tuned-cache tunes the fast path; it cannot be combined with --reference");
    std::fprintf(stderr, "qbench: %s\n",
                 apply_tuned_cache(cli.get("--tuned-cache"), file->weights(), opts, cli.given("--threads")).c_str());
  }
  // After the store's: the command line's instruction set is the one asked for.
  if (asked_isa) opts.isa = asked_isa;
  CpuBackend backend(opts);
  // Why the tiles are not used, when they are not: the backend line says which path ran.
  const std::string no_tiles =
      backend.tiles() != TileUnit::kNone ? "" : amx_support().usable ? "AMX not asked for" : amx_support().detail;
  const int64_t context = cli.given("--context") ? cli.get_int("--context") : prompt + gen + 1;
  if (context < prompt + gen) throw Error("--context must hold the prompt and the generated tokens");
  if (context > c.max_seq_len)
    throw Error("--context " + std::to_string(context) + " exceeds the model's " + std::to_string(c.max_seq_len));

  ThreadPool pool(backend.threads());
  const uint64_t bw_bytes = uint64_t(cli.get_int_as<uint32_t>("--bandwidth-mb")) << 20;
  // Bandwidth is re-measured before every repetition and the best value kept: on a shared machine it
  // varies with the neighbours' load, and the best value gives the most conservative roofline fraction.
  BandwidthResult bw;
  if (bw_bytes > 0) bw = measure_bandwidth(pool, bw_bytes, 2);

  const auto t_load = Clock::now();
  Qwen3Model model(file->weights(), backend, context);
  const double prepare_s = since(t_load);
  const std::vector<int32_t> tokens = benchmark_prompt(prompt, c.vocab_size);

  for (int64_t r = 0; r < warmup; ++r) {
    model.reset();
    model.forward(tokens, LogitsRows::kLast);
    const int32_t tok = 7;
    model.forward(&tok, 1, LogitsRows::kLast);
  }
  double best_prefill = 0, best_decode = 0;
  // The CPU time a hypervisor took during the decode repetitions: on a VM it holds decode below a bandwidth
  // whose best repetition it may have spared. Summed over the repetitions, so short ones still add up to ticks.
  CpuTimes decode_cpu{0, 0, true};
  for (int64_t r = 0; r < repeat; ++r) {
    if (bw_bytes > 0) {
      const BandwidthResult again = measure_bandwidth(pool, bw_bytes, 2);
      bw.read_gbps = std::max(bw.read_gbps, again.read_gbps);
      bw.copy_gbps = std::max(bw.copy_gbps, again.copy_gbps);
    }
    model.reset();
    auto t0 = Clock::now();
    model.forward(tokens, LogitsRows::kLast);
    best_prefill = std::max(best_prefill, double(prompt) / since(t0));
    const CpuTimes cpu0 = read_cpu_times();
    t0 = Clock::now();
    decode_steps(model, gen, c.vocab_size);
    best_decode = std::max(best_decode, double(gen) / since(t0));
    const CpuTimes cpu1 = read_cpu_times();
    decode_cpu.known = decode_cpu.known && cpu0.known && cpu1.known;
    decode_cpu.total += cpu1.total - cpu0.total, decode_cpu.steal += cpu1.steal - cpu0.steal;
  }
  const double decode_steal = steal_fraction(CpuTimes{0, 0, true}, decode_cpu);
  const uint64_t bytes = model.decode_weight_bytes();
  const double roofline = bw.read_gbps * 1e9 / double(bytes);
  // A model whose decode bytes fit in the last-level cache is not bound by DRAM bandwidth.
  // The kernel's figure (sysfs), as every cache-sized choice of the runtime takes it: under a hypervisor, glibc's
  // sysconf can report the host's whole L3 (168 MB on a 32 MB EPYC guest) and call a DRAM-bound model cached.
  const size_t l3 = cpu_last_level_cache_bytes(0);
  const bool fits_in_cache = l3 > 0 && bytes < 2 * uint64_t(l3);
  nlohmann::json j = {{"model", path},
                      {"arch", c.is_moe() ? "qwen3-moe" : "qwen3"},
                      {"layers", c.n_layers},
                      {"file_bytes", file->file_size()},
                      {"backend", backend.name()},
                      {"tiles", tile_unit_name(backend.tiles())},
                      {"amx", amx_support().detail},
                      {"kv_cache", act_type_name(backend.kv_type())},
                      {"context", context},
                      {"prepare_s", prepare_s},
                      {"prompt_tokens", prompt},
                      {"warmup_runs", warmup},
                      {"gen_tokens", gen},
                      {"prefill_tok_s", best_prefill},
                      {"decode_tok_s", best_decode},
                      {"decode_steal_fraction", decode_steal >= 0 ? nlohmann::json(decode_steal) : nlohmann::json()},
                      {"decode_weight_bytes_per_token", bytes},
                      {"read_bandwidth_gbps", bw.read_gbps},
                      {"copy_bandwidth_gbps", bw.copy_gbps},
                      {"roofline_decode_tok_s", bw_bytes > 0 ? nlohmann::json(roofline) : nlohmann::json()},
                      {"decode_fraction_of_roofline",
                       bw_bytes > 0 ? nlohmann::json(best_decode / roofline) : nlohmann::json()},
                      {"weights_fit_in_cache", fits_in_cache},
                      {"peak_rss_mb", double(peak_rss_bytes()) / 1e6}};
  if (cli.get_flag("--json")) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("model        %s (%s, %d layers, %.1f MB)\n", path.c_str(), j["arch"].get<std::string>().c_str(),
              c.n_layers, double(file->file_size()) / 1e6);
  std::printf("backend      %s, KV cache %s (prepare %.2f s)%s%s\n", backend.name().c_str(),
              act_type_name(backend.kv_type()), prepare_s, no_tiles.empty() ? "" : "; no AMX tiles: ",
              no_tiles.c_str());
  if (bw_bytes > 0)
    std::printf("bandwidth    read %.2f GB/s, copy %.2f GB/s (%llu MB buffer, best of all repetitions)\n", bw.read_gbps,
                bw.copy_gbps, static_cast<unsigned long long>(bw.buffer_bytes >> 20));
  std::printf("prefill      %.1f tok/s (%lld-token prompt, best of %lld after %lld unmeasured)\n", best_prefill,
              static_cast<long long>(prompt), static_cast<long long>(repeat), static_cast<long long>(warmup));
  const std::string stolen = decode_steal < 0 ? "" :
      "; " + format_number("%.1f", 100.0 * decode_steal) +
      "% of the CPU time of the decode runs stolen by the hypervisor";
  std::printf("decode       %.2f tok/s (%lld steps after the prompt, best of %lld%s)\n", best_decode,
              static_cast<long long>(gen), static_cast<long long>(repeat), stolen.c_str());
  if (bw_bytes > 0)
    std::printf("roofline     %.1f MB of weights per decode step -> %.2f tok/s at the read bandwidth; decode reaches "
                "%.0f%% of it\n",
                double(bytes) / 1e6, roofline, 100.0 * best_decode / roofline);
  if (fits_in_cache)
    std::printf("note         the decode bytes fit in twice the last-level cache (%.1f MB): the DRAM roofline does "
                "not bound this model\n", double(l3) / 1e6);
  std::printf("peak memory  %.1f MB\n", double(peak_rss_bytes()) / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return qt::run_tool("qbench", [&] { return run(argc, argv); }); }
