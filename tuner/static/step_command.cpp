#include "tuner/static/step_command.h"

#include <sqlite3.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/number_format.h"
#include "device/arch/arch_limits.h"
#include "device/winners/store_schema.h"
#include "device/winners/winners.h"
#include "kernels_src/moe_wgmma/moe_wgmma_family.h"
#include "models/core/config_limits.h"
#include "models/formats/model_file.h"
#include "models/synthetic/presets.h"
#include "tuner/static/step_against.h"
#include "tuner/static/step_predict.h"

namespace qt::tune {
namespace {

// The types a preset's weights take in a model file of `format`, as qconvert writes it (WriterOptions): ak48
// holds AWQ projections (group 128, halved until it divides every K) beside fp16 embedding and lm_head; ajc1 holds everything in Q8_0; moe3
// holds Q8_0 beside experts of --expert-type. Q8_0's group is qwen3.c's rule, 64 halved until it divides dim.
StepWeights preset_weights(const ModelConfig& c, FileFormat format, WeightType expert, int64_t group) {
  StepWeights w;
  const int64_t q8_group = group ? group : default_group_dividing(WeightType::Q8_0, {c.dim});
  auto all = [&](WeightType t, int64_t g) {
    w.dense = w.embedding = w.head = w.router = t;
    w.dense_group = w.embedding_group = w.head_group = w.router_group = g;
  };
  if (format == FileFormat::AK48) {
    all(WeightType::F16, 0);
    w.dense = WeightType::AWQ_INT4;
    // qconvert's default AWQ group where the checkpoint names none: 128 halved until it divides every K.
    w.dense_group = group ? group : default_group_dividing(WeightType::AWQ_INT4, {c.dim, c.q_dim(), c.hidden_dim});
  } else {
    all(WeightType::Q8_0, q8_group);
  }
  w.expert = expert;
  w.expert_group = q8_group;  // moe3: the experts' group is the file's unless given
  return w;
}

// The GPU figures of the first GPU a tuning store names (its fingerprint), read without changing the file.
dev::DeviceFingerprint store_device(const std::string& path) {
  sqlite3* db = winners::open_store_read_only(path, /*immutable=*/true);
  std::vector<winners::StoredDevice> devices;
  try {
    devices = winners::read_devices(db);
  } catch (const std::exception& e) {
    sqlite3_close(db);
    throw Error(path + ": not a qtune tuning store (" + e.what() + ")", kExitBadInput);
  }
  sqlite3_close(db);
  for (const winners::StoredDevice& d : devices)
    if (d.fingerprint.arch.rfind("sm_", 0) == 0 && d.fingerprint.name != "emu") return d.fingerprint;
  if (devices.empty()) throw Error(path + ": the store names no device", kExitBadInput);
  throw Error(path + ": the store names no GPU (its devices: " + devices.front().fingerprint.name +
                  (devices.size() > 1 ? " and " + std::to_string(devices.size() - 1) + " more" : "") +
                  "), so it has no GPU's figures to give",
              kExitBadInput);
}

// The flags declare_step_flags adds, and those of the per-family table, which a step prediction does not read.
constexpr const char* kStepOnly[] = {"--context", "--prompt", "--preset", "--format", "--expert-type", "--group-size",
                                     "--layers", "--weight-layout", "--predequantize", "--prefill-f16", "--fuse-norm", "--int8-layout", "--expert-layout",
                                     "--no-concat",
                                     "--fingerprint-store", "--launch-us", "--against-launches", "--no-registers"};
// (--cache-dir, --no-cache and --threads serve both: a step compiles the points it settles on.)
constexpr const char* kTableOnly[] = {"--kernel", "--points", "--m"};

StepSpec spec_from_flags(const CliArgs& cli, int sm, std::string* description) {
  for (const char* flag : kTableOnly)
    if (cli.given(flag)) throw Error(std::string(flag) + " applies to the per-family table, not to --step");
  StepSpec spec;
  const std::string step = cli.get("--step");
  if (step != "decode" && step != "prefill") throw Error("--step is decode or prefill, got '" + step + "'");
  spec.decode = step == "decode";
  if (spec.decode && cli.given("--prompt")) throw Error("--prompt sets a prefill's tokens; a decode step takes --context");
  if (!spec.decode && cli.given("--context")) throw Error("--context sets a decode step's cache; a prefill takes --prompt");
  spec.context = spec.decode ? cli.get_int("--context") : cli.get_int("--prompt");
  if (auto model = cli.get_optional("--model")) {
    for (const char* preset_only : {"--preset", "--format", "--expert-type", "--group-size"})
      if (cli.given(preset_only)) throw Error(std::string(preset_only) + " describes a preset; --model gives its own");
    std::shared_ptr<ModelFile> file = ModelFile::open(*model);
    if (file->weights().layers.empty()) throw Error(*model + ": model has no layers");
    spec.config = file->config();
    spec.weights = step_weights(file->weights());
    *description = *model + " (" + file_format_name(file->format()) + ")";
  } else {
    const std::string preset = cli.get("--preset");
    spec.config = synthetic::preset_config(preset);
    const FileFormat format =
        parse_file_format(cli.get_optional("--format").value_or(spec.config.is_moe() ? "moe3" : "ak48"));
    if ((format == FileFormat::MOE3) != spec.config.is_moe())
      throw Error("--format moe3 describes a MoE preset, ak48 and ajc1 a dense one");
    WeightType expert = WeightType::Q8_0;
    if (auto e = cli.get_optional("--expert-type")) {
      if (format != FileFormat::MOE3) throw Error("--expert-type only applies to --format moe3");
      const auto t = quantized_type_by_option_name(*e);
      if (!t) throw Error("--expert-type: unknown type '" + *e + "' (q8_0, int8-sym, int8-asym, awq)");
      expert = *t;
    }
    const int64_t group = cli.given("--group-size") ? cli.get_int("--group-size") : 0;
    spec.weights = preset_weights(spec.config, format, expert, group);
    *description = "preset " + preset + " as " + file_format_name(format);
  }
  if (cli.given("--layers")) spec.config.n_layers = int32_t(cli.get_int("--layers"));
  *description += ", " + std::to_string(spec.config.n_layers) + " layers";
  const std::string layout = cli.get("--weight-layout");
  if (layout != "frag" && layout != "file") throw Error("--weight-layout is frag or file, got '" + layout + "'");
  spec.runtime.frag_layout = layout == "frag";
  spec.runtime.predequantize = cli.get_flag("--predequantize");
  spec.runtime.prefill_f16 = cli.get_flag("--prefill-f16");
  if (spec.runtime.prefill_f16 && (spec.runtime.predequantize || !spec.runtime.frag_layout))
    throw Error(std::string("--prefill-f16 keeps an fp16 copy beside the frag layout's weights: it cannot be given with ") +
                (spec.runtime.predequantize ? "--predequantize" : "--weight-layout file"));
  const std::string int8 = cli.get("--int8-layout");
  if (int8 != "plain" && int8 != "trtllm") throw Error("--int8-layout is plain or trtllm, got '" + int8 + "'");
  spec.runtime.trtllm_int8 = int8 == "trtllm";
  const std::string experts = cli.get("--expert-layout");
  if (experts != "frag" && experts != "file" && experts != "auto")
    throw Error("--expert-layout is auto, frag or file, got '" + experts + "'");
  if (experts == "frag" && spec.runtime.trtllm_int8)
    throw Error("--expert-layout frag and --int8-layout trtllm each choose the experts' layout: give one");
  // auto: what DeviceBackend::prepare picks on this architecture.
  spec.runtime.frag_experts =
      experts == "auto" ? kernels::moe_wgmma::frag_experts_by_default(sm, spec.runtime.trtllm_int8) : experts == "frag";
  spec.runtime.concatenate_qkv = spec.runtime.concatenate_gate_up = !cli.get_flag("--no-concat");
  spec.runtime.fuse_norm = cli.get_flag("--fuse-norm");
  spec.runtime.dequant_blas = !cli.get_flag("--no-dequant-blas");
  spec.runtime.register_ring = cli.get_flag("--register-ring");
  spec.runtime.gemv_first = cli.get_flag("--gemv-first");
  // A step qrun would refuse to run is no step to predict.
  if (spec.runtime.fuse_norm && !spec.decode)
    throw Error("--fuse-norm fuses a decode step's norms; a prefill runs them as launches (drop it, or --step decode)");
  if (spec.runtime.fuse_norm && (!spec.runtime.frag_layout || spec.runtime.predequantize))
    throw Error(std::string("--fuse-norm runs on the frag layout's GEMVs: it cannot be given with ") +
                (spec.runtime.predequantize ? "--predequantize" : "--weight-layout file"));
  const int64_t tokens = spec.context + (spec.decode ? 1 : 0);  // a decode step adds its token to the cache
  if (tokens > spec.config.max_seq_len)
    throw Error(std::string(spec.decode ? "--context " : "--prompt ") + std::to_string(spec.context) +
                (spec.decode ? " plus the step's token" : "") + " exceeds the model's maximum of " +
                std::to_string(spec.config.max_seq_len) + " tokens");
  return spec;
}

std::string launch_cell(const LaunchEstimate& e) { return e.family + (e.point.empty() ? "" : " " + e.point); }

nlohmann::json estimate_json(const LaunchEstimate& e) {
  nlohmann::json j = {{"family", e.family}, {"point", e.point}, {"us", e.e.seconds * 1e6}, {"bytes", e.e.bytes},
                      {"flops", e.e.flops}, {"bound", e.e.bound}, {"launches", e.launches}};
  if (e.registers > 0) j["registers"] = e.registers;
  return j;
}

}  // namespace

void declare_step_flags(CliArgs& cli) {
  cli.option("--step", "KIND", "predict one whole step instead: decode (one token) or prefill (--prompt tokens)")
      .option("--context", "N", "--step decode: tokens already in the KV cache", "128")
      .range(limits::kTokenCountRange)
      .option("--prompt", "N", "--step prefill: tokens of the prompt", "512")
      .range(limits::kTokenCountRange)
      .option("--preset", "NAME", "--step: the shapes of a qconvert synthetic preset (without --model)", "qwen3-8b")
      .option("--format", "FMT", "--step with --preset: the file format whose weight types to assume: ak48 (AWQ), "
              "ajc1 (Q8_0), moe3 (default: ak48, moe3 for a MoE preset)")
      .option("--expert-type", "TYPE", "--step with a moe3 preset: q8_0, int8-sym, int8-asym or awq (default q8_0)")
      .option("--group-size", "N", "--step with --preset: the quantization group (default: the format's)")
      .range(limits::kGroupSizeRange)
      .option("--layers", "N", "--step: override the model's layer count")
      .range(limits::kLayersRange)
      .option("--weight-layout", "L", "--step: dense quantized weights in the frag layout (frag) or as stored (file)",
              "frag")
      .flag("--predequantize", "--step: dense weights and the lm_head held as fp16 (qrun --predequantize)")
      .flag("--prefill-f16", "--step: frag-layout dense weights with an fp16 copy beside, on which a prefill's GEMMs "
            "run (qrun --prefill-f16)")
      .option("--int8-layout", "L", "--step: INT8 group-wise experts as stored (plain) or TensorRT-LLM's (trtllm)",
              "plain")
      .option("--expert-layout", "L", "--step: MoE experts as stored (file) or in the frag layout on the wgmma "
              "grouped GEMMs (frag, sm_90); auto: as the runtime picks (frag on sm_90)", "auto")
      .flag("--no-concat", "--step: q/k/v and gate/up as separate launches (the runtime before their "
            "concatenation, e.g. the H200 run of 2026-11-26)")
      .flag("--fuse-norm", "--step: a decode step's norms inside the stream GEMVs beside them (qrun --fuse-norm)")
      .flag("--no-dequant-blas", "--step: quantized projections on the GEMM families (the frag layout's wgmma "
            "GEMM on sm_90) at every row count, as a tuned dispatch that chose them runs; without it, the untuned "
            "route: dequant + cuBLASLt from 64 rows")
      .flag("--register-ring", "--step: the stream GEMVs' untuned defaults on their register ring (ring=0), as the "
            "runtime ran them before 30 Nov (the H200 runs); without it, the shared ring the defaults run since")
      .flag("--gemv-first", "--step: the frag GEMVs before the stream GEMVs where nothing is tuned (M <= 16), as the "
            "runtime preferred them before 1 Dec (the H200 runs); without it, the stream GEMVs first")
      .option("--fingerprint-store", "FILE", "--step: the GPU figures of the device a tuning store was measured on "
              "(its SM count and DRAM bandwidth) instead of the architecture's datasheet")
      .option("--launch-us", "US", "--step: the in-stream cost per launch to assume instead of the calibrated one "
              "(GpuPeaks::stream_launch_us): a what-if, e.g. at a launch cost qbench --report measured; the kernels' "
              "bodies are unchanged")
      .range(RealRange{0, 1000})
      .option("--against-launches", "FILE", "--step: beside the prediction, what qrun --launch-times measured (its "
              "decode steps, or its steps of --prompt rows): per kernel the launches and time per step, predicted and "
              "measured, and the time between launches against the model's launch cost")
      .flag("--no-registers", "--step: leave the chosen points uncompiled: occupancy from threads and shared memory "
                              "alone (faster; flatters register-bound kernels such as gate|up)");
}

void check_step_flags(const CliArgs& cli) {
  if (cli.given("--step")) return;
  for (const char* flag : kStepOnly)
    if (cli.given(flag)) throw Error(std::string(flag) + " applies only with --step");
}

int run_step_prediction(const CliArgs& cli, int sm) {
  std::string description;
  const StepSpec spec = spec_from_flags(cli, sm, &description);
  GpuPeaks peak = gpu_peaks(sm);
  if (auto store = cli.get_optional("--fingerprint-store")) peak = gpu_peaks(store_device(*store));
  const bool what_if = cli.given("--launch-us");
  if (what_if) peak.stream_launch_us = cli.get_double("--launch-us");
  std::unique_ptr<compile::CompileService> service;
  if (!cli.get_flag("--no-registers")) {
    compile::ServiceOptions opt;
    opt.cache_dir = cli.get_optional("--cache-dir").value_or("");
    opt.use_cache = !cli.get_flag("--no-cache");
    opt.threads = cli.get_int_as<int>("--threads");
    service = std::make_unique<compile::CompileService>(opt);
  }
  const StepPrediction p = predict_step(spec, sm, peak, service.get());
  // Read before anything is printed, so that a file that does not fit is refused on its own line.
  std::optional<LaunchComparison> timed;
  if (auto times = cli.get_optional("--against-launches"))
    timed = compare_launches(p, *times, spec.decode, spec.context, peak.stream_launch_us);

  std::cout << "PREDICTION by the static roofline model (no GPU run): one " << (spec.decode ? "decode step" : "prefill")
            << " of " << description << ", "
            << (spec.decode ? "context " + std::to_string(spec.context) : std::to_string(spec.context) + " tokens")
            << ", on " << peak.name << " (" << peak.sms << " SMs, " << format_number("%.0f", peak.dram_gbps) << " GB/s, "
            << format_number("%.0f%%", 100 * peak.dram_efficiency) << " achievable; " << format_number("%.1f", peak.stream_launch_us)
            << " us per launch in a stream" << (what_if ? ", given by --launch-us, not calibrated" : "") << ")\n"
            << "default: the family the runtime picks without a tuned store; model-best: the model's fastest point "
               "over every family serving the op (a tuned run's prediction)\n"
            << (service ? "registers: each launch's chosen points compiled by NVRTC for " + compile::arch_name(sm) +
                              " (the model-best search itself runs without them)" +
                              (p.uncompiled ? "; " + std::to_string(p.uncompiled) +
                                                  " of them did not compile and are timed without registers"
                                            : std::string()) +
                              "\n\n"
                        : std::string("registers are not compiled in (--no-registers): occupancy from threads and "
                                      "shared memory alone\n\n"));
  std::printf("%-28s %5s  %-34s  %-58s %9s %9s %-8s  %-58s %9s\n", "launch", "count", "shape", "default", "us", "MB",
              "bound", "model-best", "us");
  nlohmann::json launches = nlohmann::json::array();
  for (const LaunchPrediction& l : p.launches) {
    std::printf("%-28s %5lld  %-34s  %-58s %9.2f %9.3f %-8s  %-58s %9.2f\n", l.launch.what.c_str(),
                static_cast<long long>(l.launch.count), kernels::shape_key(l.launch.shape).c_str(),
                launch_cell(l.by_default).c_str(), l.by_default.e.seconds * 1e6, l.by_default.e.bytes / 1e6,
                l.by_default.e.bound.c_str(), launch_cell(l.best).c_str(), l.best.e.seconds * 1e6);
    launches.push_back({{"what", l.launch.what}, {"op", l.launch.op}, {"count", l.launch.count},
                        {"shape", kernels::shape_key(l.launch.shape)}, {"default", estimate_json(l.by_default)},
                        {"best", estimate_json(l.best)}});
  }
  const double share_default = p.roofline_s / p.default_s, share_best = p.roofline_s / p.best_s;
  std::printf("\nstep: default %.1f us in %lld launches -> %.1f tok/s; model-best %.1f us in %lld launches -> %.1f tok/s\n",
              p.default_s * 1e6, static_cast<long long>(p.default_launches), p.default_tok_s(), p.best_s * 1e6,
              static_cast<long long>(p.best_launches), p.best_tok_s());
  std::printf("roofline: %.1f MB of weights + %.1f MB of KV cache at %.0f GB/s achievable -> %.1f tok/s; "
              "default %.1f%%, model-best %.1f%% of it\n",
              p.min_bytes.weights / 1e6, p.min_bytes.kv / 1e6, peak.dram_gbps * peak.dram_efficiency,
              p.roofline_tok_s(), 100 * share_default, 100 * share_best);
  nlohmann::json against;
  if (timed) {
    const LaunchComparison& c = *timed;
    const std::string times = cli.get("--against-launches");
    std::printf("\nagainst %s: %zu measured step%s on %s (every launch between events, no graph)%s\n", times.c_str(),
                c.steps, c.steps == 1 ? "" : "s", c.device.c_str(),
                c.device == "emu" ? "; the emulator's times are no GPU's: compare the launches, not the times" : "");
    std::printf("%-64s %10s %10s %11s %11s %8s\n", "kernel", "launches", "measured", "us/step", "measured", "ratio");
    nlohmann::json rows = nlohmann::json::array();
    for (const KernelTimes& k : c.kernels) {
      std::printf("%-64s %10.1f %10.1f %11.1f %11.1f %8s\n", k.kernel.c_str(), k.predicted_launches,
                  k.measured_launches, k.predicted_s * 1e6, k.measured_s * 1e6,
                  k.measured_s > 0 && k.predicted_s > 0 ? format_number("%.2f", k.predicted_s / k.measured_s).c_str() : "-");
      rows.push_back({{"kernel", k.kernel}, {"predicted_launches", k.predicted_launches},
                      {"measured_launches", k.measured_launches}, {"predicted_s", k.predicted_s},
                      {"measured_s", k.measured_s}});
    }
    const double gap = c.measured_step_s - c.measured_kernels_s;
    std::printf("kernels: predicted %.1f us, measured %.1f us (%s); launches %.0f predicted, %.0f measured\n",
                c.predicted_kernels_s * 1e6, c.measured_kernels_s * 1e6,
                c.measured_kernels_s > 0 ? format_number("%.2fx", c.predicted_kernels_s / c.measured_kernels_s).c_str() : "-",
                c.predicted_launches, c.measured_launches);
    std::printf("between launches: the model adds %.1f us (%.1f us a launch); measured %.1f us (%.2f us a launch, %s)\n",
                c.predicted_launch_cost_s * 1e6, peak.stream_launch_us, gap * 1e6,
                c.measured_launches > 0 ? gap / c.measured_launches * 1e6 : 0.0,
                spec.decode ? "the events' own cost included; a graph's step has none of it"
                            : "the step's host work between its launches included (uploads, downloads)");
    against = {{"file", times}, {"device", c.device}, {"steps", c.steps}, {"kernels", rows},
               {"measured_step_s", c.measured_step_s}, {"measured_kernels_s", c.measured_kernels_s},
               {"predicted_kernels_s", c.predicted_kernels_s}, {"measured_launches", c.measured_launches},
               {"predicted_launches", c.predicted_launches}, {"predicted_launch_cost_s", c.predicted_launch_cost_s}};
  }
  if (auto path = cli.get_optional("--json")) {
    nlohmann::json j = {{"prediction", true}, {"step", spec.decode ? "decode" : "prefill"},
                              {"model", description}, {"context", spec.context}, {"gpu", peak.name},
                              {"launches", launches}, {"default_us", p.default_s * 1e6}, {"best_us", p.best_s * 1e6},
                              {"default_launches", p.default_launches}, {"best_launches", p.best_launches},
                              {"stream_launch_us", peak.stream_launch_us},
                              {"registers_compiled", p.registers_compiled}, {"uncompiled_points", p.uncompiled},
                              {"default_tok_s", p.default_tok_s()}, {"best_tok_s", p.best_tok_s()},
                              {"weight_bytes", p.min_bytes.weights}, {"kv_bytes", p.min_bytes.kv},
                              {"roofline_tok_s", p.roofline_tok_s()}, {"default_roofline_share", share_default},
                              {"best_roofline_share", share_best}};
    if (!against.is_null()) j["against_launches"] = against;
    std::ofstream f(*path);
    f << j.dump(1) << "\n";
    if (!f) throw Error("cannot write " + *path, kExitFailure);
  }
  return kExitOk;
}

}  // namespace qt::tune
