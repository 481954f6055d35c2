// qrun: run a Qwen3 / Qwen3-MoE model file on the CPU, the CUDA emulator or a GPU — one prompt, an
// interactive chat, or (for scripts) raw token ids in and logits out.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cli_args.h"
#include "common/error.h"
#include "device/arch/arch_limits.h"
#include "common/flag_ranges.h"
#include "common/paths.h"
#include "common/progress.h"
#include "models/core/config_limits.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "models/formats/model_file.h"
#include "runtime/cli/generation.h"
#include "runtime/cli/run_device.h"
#include "runtime/cli/tokenizer_session.h"
#include "runtime/cli/tuned_cache.h"
#include "runtime/cli/launch_times.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/model/qwen3_model.h"
#include "runtime/sampler/sampler.h"

namespace {

using namespace qt;
using namespace qt::rt;

CliArgs make_cli() {
  CliArgs cli("qrun", "Runs a Qwen3 / Qwen3-MoE model file (ajc1, moe3, ak48) on the CPU, the emulator or a GPU.");
  cli.option("-m,--model", "PATH", "model file (default: the synthetic default model scripts/setup.sh creates)")
      .option("--tokenizer", "PATH", "tokenizer.json (default: beside the model, else the shipped Qwen3 one)")
      .option("-p,--prompt", "TEXT", "the user message (or raw text with --raw)")
      .option("-n,--n-predict", "N", "tokens to generate per turn", "256").range(IntRange{0, limits::kMaxSeqLen})
      .option("--temp", "T", "temperature; 0 = greedy (default: 0.6 thinking, 0.7 non-thinking)")
      .range(kTemperatureRange)
      .option("--top-k", "K", "keep the K most likely tokens; 0 = off (default 20)").range(kTopKRange)
      .option("--top-p", "P", "nucleus sampling mass (default: 0.95 thinking, 0.8 non-thinking)").range(kTopPRange)
      .option("--min-p", "P", "drop tokens below P x the top probability (default 0)").range(kMinPRange)
      .option("--repeat-penalty", "R", "repetition penalty on tokens already seen; 1 = off", "1")
      .range(kRepetitionPenaltyRange)
      .option("--repeat-last-n", "N", "history window of the repetition penalty; 0 = all", "0")
      .range(kRepeatLastNRange)
      .option("--seed", "S", "random seed (default: from the clock, printed in the statistics line)")
      .range(flag_ranges::kSeed)
      .option("--system", "TEXT", "system message of the chat").allow_empty()
      .flag("--think", "thinking mode (Qwen3's default)")
      .flag("--no-think", "non-thinking mode: the template's empty <think></think> block")
      .flag("--raw", "no chat template: the prompt is encoded as plain text")
      .flag("-i,--interactive", "chat on stdin, keeping the KV cache across turns (/reset, /exit)")
      .option("--device", "NAME", "cpu; emu (the CUDA emulator) or cuda (a GPU): fp16 activations", "cpu")
      .option("--weight-layout", "L", "emu/cuda: dense AWQ INT4, INT8 group-wise and Q8_0 projections repacked at load time "
              "into mma fragment order (frag, the fraglinear families) or kept as stored (file)", "frag")
      .option("--expert-layout", "L", "emu/cuda: MoE experts as stored (file), or repacked at load time into the frag "
              "layout and run by the grouped GEMMs on Hopper's wgmma (frag: sm_90 only, 2.1-2.6x faster there on an "
              "H200); auto: frag on sm_90, file elsewhere", "auto")
      .option("--int8-layout", "L", "emu/cuda: INT8 group-wise MoE experts as stored (plain) or in TensorRT-LLM's "
              "preprocessed layout (trtllm), made at load time", "plain")
      .flag("--no-checks", "emu: run kernels without the race and bounds instrumentation (about 3x faster)")
      .option("--emu-arch", "ARCH", "emu: the architecture the emulator presents, sm80, sm86, sm89 or sm90 (sm90 runs "
              "the sm_90a families; a tuned cache from `qtune --device emu --gpu ARCH` needs the same)", "sm80")
      .flag("--predequantize", "emu/cuda: dense linear weights dequantized to fp16 once at load and run through "
            "cuBLASLt (cuda) or the fp16 kernels, whichever the tuned cache measured faster: more memory, faster prefill")
      .flag("--prefill-f16", "emu/cuda: keep an fp16 copy of the dense projections beside their quantized weights "
            "(frag layout): a prefill's GEMMs run on it as on --predequantize's weights, with no dequant per call, and "
            "decode keeps reading the quantized ones; costs the fp16 bytes too (an AWQ 8B model: 6.1 + 14 GB)")
      .flag("--no-graphs", "emu/cuda: launch every kernel instead of replaying captured decode steps")
      .option("--launch-times", "FILE", "emu/cuda: time every launch of every step between two events (no graphs) and "
              "write them as JSON, with per kernel over the decode steps its count, mean time and share of the step "
              "(printed too): what qtune static --step predicts, launch by launch")
      .flag("--pdl", "cuda: programmatic dependent launch (sm_90+): each kernel is scheduled while the one before it "
            "runs and waits for it in its first statement, hiding launch latency between a step's kernels")
      .flag("--fuse-norm", "emu/cuda: decode steps run each layer's norms inside the kernels beside them (q|k|v and "
            "gate|up normalize as they read, o_proj and down_proj add to the hidden state, attention rotates its "
            "own q and writes the new k/v row): a dense layer in 5 launches instead of 8; a MoE layer's o_proj also "
            "writes its norm, and frag-layout experts (sm_90) run as two GEMVs straight from the router's logits: "
            "6 launches instead of about 15; frag-layout weights (AWQ, INT8 group-wise, Q8_0)")
      .flag("--no-stored-decode", "with --tuned-cache: ignore the decode variant (fused norms, PDL; on the CPU the "
            "prefetch) that `qbench --choose-decode` measured fastest and stored in it, and choose as --decode auto "
            "does without a store; without this, --decode, --fuse-norm or --pdl, qrun runs the stored variant")
      .option("--decode", "V", "the decode step's variant. emu/cuda: plain, pdl, fused-norm or fused-norm+pdl (as "
              "--fuse-norm and --pdl give them); trial: time plain against the most fused variant this run can use on "
              "the first decode steps, then go on with the faster. cpu: plain, no-prefetch or l1-prefetch (the Q8_0 "
              "decode's software prefetch into L2, none, or into L1: the same bits). auto: the variant a tuned cache "
              "ranks first (qbench --choose-decode), else the trial on a CUDA GPU (not with --launch-times, which times one "
              "variant), else plain. GPU variants agree to within rounding: name one to repeat a run bit for bit",
              "auto")
      .flag("-v,--verbose", "emu/cuda: list the kernel chosen for every op shape and why")
      .flag("--reference", "reference path: dequantized weights, fp32 activations (slow, exact)")
      .option("--threads", "N", "CPU threads (default: all; emu: host threads running blocks)")
      .range(flag_ranges::kThreads)
      .option("-c,--context", "N", "context length in tokens (default: min(4096, model maximum))")
      .range(limits::kTokenCountRange)
      .option("--tuned-cache", "PATH", "tuning store written by qtune; this device's winners are used")
      .option("--prompt-ids", "IDS", "comma-separated token ids instead of text (needs no tokenizer)")
      .list_range(flag_ranges::kTokenId)
      .option("--logits-out", "FILE", "write float32 logits of every prompt position ([tokens, vocab], little-endian)")
      .flag("--no-stats", "do not print the statistics line");
  return cli;
}

struct Settings {
  std::string model_path, tokenizer_path;
  bool default_model = false, think = true;
  int64_t n_predict = 256, context = 0;
  SamplerConfig sampling;
};

SamplerConfig sampling_from(const CliArgs& cli, bool think) {
  SamplerConfig s;
  s.temperature = think ? 0.6f : 0.7f;
  s.top_p = think ? 0.95f : 0.8f;
  s.top_k = 20;
  s.min_p = 0.0f;
  if (cli.given("--temp")) s.temperature = float(cli.get_double("--temp"));
  if (cli.given("--top-k")) s.top_k = cli.get_int_as<int32_t>("--top-k");
  if (cli.given("--top-p")) s.top_p = float(cli.get_double("--top-p"));
  if (cli.given("--min-p")) s.min_p = float(cli.get_double("--min-p"));
  s.repetition_penalty = float(cli.get_double("--repeat-penalty"));
  s.repeat_last_n = cli.get_int_as<int32_t>("--repeat-last-n");
  s.seed = cli.given("--seed") ? cli.get_int_as<uint64_t>("--seed") : uint64_t(std::random_device{}()) << 16 ^
                                                                        uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  validate_sampler_config(s);
  return s;
}

void write_logits(const std::string& path, const std::vector<float>& logits) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
  if (!out) throw Error(path + ": write failed");
}

std::string rate(double tokens, double seconds) {
  if (tokens <= 0 || seconds <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f tok/s", tokens / seconds);
  return buf;
}

void print_stats(const TurnStats& s, uint64_t seed) {
  std::fprintf(stderr,
               "qrun: prompt %lld tok, %s | generated %lld tok, %s%s | time to first token %.3f s | peak memory %.1f MB"
               " | seed %llu\n",
               static_cast<long long>(s.prompt_tokens), rate(double(s.prompt_tokens), s.prefill_s).c_str(),
               static_cast<long long>(s.generated), rate(double(s.generated - 1), s.decode_s).c_str(),
               s.hit_context ? " (stopped: the context is full, see -c/--context)" : "", s.first_token_s,
               double(peak_rss_bytes()) / 1e6, static_cast<unsigned long long>(seed));
}

void report_device(const RunDevice& d, bool verbose) {
  if (!d.device_backend) return;
  std::fprintf(stderr, "qrun: %s\n", device_report(d).c_str());
  if (verbose)
    for (const std::string& line : d.device_backend->chooser().details()) std::fprintf(stderr, "qrun:   %s\n", line.c_str());
}

// --decode trial where the run has one decode variant (no fused norms on its weights, no PDL on its device):
// nothing is timed, and the user hears why.
void note_untried_trial(const std::string& decode, const RunDevice& d) {
  if (decode == "trial" && !d.trial && d.device_backend)
    std::fprintf(stderr, "qrun: --decode trial: this run has one decode variant (plain): fused norms need the frag "
                         "layout's quantized weights (not --weight-layout file or --predequantize) and PDL a CUDA GPU "
                         "of sm_90 or later, so nothing is timed\n");
}

int run(int argc, char** argv) {
  CliArgs cli = make_cli();
  if (!cli.parse(argc, argv)) return 0;
  const std::string device = cli.get("--device");
  if (device != "cpu" && device != "emu" && device != "cuda")
    throw Error("--device: unknown device '" + device + "' (cpu, emu, cuda)");
  if (device != "cpu" && cli.get_flag("--reference"))
    throw Error("--reference is the CPU's exact path; it cannot be combined with --device " + device);
  if (cli.get_flag("--think") && cli.get_flag("--no-think")) throw Error("--think and --no-think exclude each other");
  const bool think = !cli.get_flag("--no-think");
  const bool ids_mode = cli.given("--prompt-ids");
  if (ids_mode && (cli.given("--prompt") || cli.get_flag("--interactive")))
    throw Error("--prompt-ids cannot be combined with --prompt or --interactive");
  if (cli.given("--logits-out") && !ids_mode) throw Error("--logits-out needs --prompt-ids");
  for (const char* out : {"--logits-out", "--launch-times"}) {
    if (!cli.given(out)) continue;
    if (const std::string why = output_file_problem(cli.get(out)); !why.empty())
      throw Error(std::string(out) + " " + cli.get(out) + ": " + why);
  }
  if (cli.given("--launch-times")) {
    if (device == "cpu") throw Error("--launch-times is a device option (--device emu/cuda)");
    if (cli.get_flag("--pdl"))
      throw Error("--launch-times times each launch between two events, which leaves programmatic dependent launch "
                  "nothing to overlap: give one of --launch-times and --pdl");
    const std::string model = cli.given("--model") ? cli.get("--model") : default_model_path();
    if (const std::string why = overwrites_input(cli.get("--launch-times"),
                                                 {model, cli.given("--tuned-cache") ? cli.get("--tuned-cache") : ""});
        !why.empty())
      throw Error("--launch-times " + why);
  }
  if (cli.given("--logits-out")) {
    const std::string model = cli.given("--model") ? cli.get("--model") : default_model_path();
    if (const std::string why = overwrites_input(cli.get("--logits-out"),
                                                 {model, cli.given("--tuned-cache") ? cli.get("--tuned-cache") : ""});
        !why.empty())
      throw Error("--logits-out " + why);
  }
  // Token ids bypass the tokenizer and the chat template: options of those would be silently ignored.
  if (ids_mode)
    for (const char* o : {"--raw", "--system", "--think", "--no-think", "--tokenizer"})
      if (cli.given(o)) throw Error(std::string(o) + " shapes the text prompt; --prompt-ids gives the tokens themselves");
  if (!ids_mode && !cli.given("--prompt") && !cli.get_flag("--interactive"))
    throw Error("nothing to do: give -p/--prompt, -i/--interactive or --prompt-ids (see qrun --help)");
  const int64_t n_predict = cli.get_int("--n-predict");

  if (cli.given("--tuned-cache"))
    if (const std::string why = regular_file_problem(cli.get("--tuned-cache")); !why.empty())
      throw Error("--tuned-cache: " + cli.get("--tuned-cache") + ": " + why);

  const bool default_model = !cli.given("--model");
  const std::string model_path = default_model ? default_model_path() : cli.get("--model");
  if (!file_exists(model_path)) {
    if (default_model)
      throw Error("the default model " + model_path + " does not exist; create it with `bash scripts/setup.sh` "
                  "or pass --model");
    throw Error("--model: " + model_path + ": " + regular_file_problem(model_path));
  }
  const auto file = ModelFile::open(model_path);
  const ModelConfig& cfg = file->config();
  if (default_model)
    std::fprintf(stderr, "qrun: note: the default model is synthetic (random weights, real Qwen3 tokenizer): its "
                         "output is gibberish by design; pass --model for a real model\n");

  int64_t context = cli.given("--context") ? cli.get_int("--context") : std::min<int64_t>(4096, cfg.max_seq_len);
  if (context > cfg.max_seq_len)
    throw Error("-c/--context " + std::to_string(context) + " exceeds the model's maximum of " +
                std::to_string(cfg.max_seq_len) + " tokens");

  RunDeviceOptions run_opts;
  run_opts.device = device;
  run_opts.graphs = !cli.get_flag("--no-graphs");
  run_opts.time_launches = cli.given("--launch-times");
  run_opts.emu_checks = !cli.get_flag("--no-checks");
  // --decode names the variant itself, or leaves it to the store or the trial; --fuse-norm and --pdl name parts of it.
  const std::string decode = cli.get("--decode");
  std::optional<DecodeVariant> decode_variant;
  if (decode != "auto" && decode != "trial") {
    const std::string prefix = device == "cpu" ? "cpu." : "";
    decode_variant = variant_of(prefix + winners::kDecodeVariantStem + decode, prefix);
    if (!decode_variant && device == "cpu")
      throw Error("--decode on the CPU: expected auto, plain, no-prefetch or l1-prefetch, got '" + decode + "'");
    if (!decode_variant)
      throw Error("--decode: expected auto, trial, plain, pdl, fused-norm or fused-norm+pdl, got '" + decode + "'");
    if (decode_variant->prefetch != DecodePrefetch::kL2 && device != "cpu")
      throw Error("--decode " + decode + " is the CPU's variant (--device cpu)");
  }
  if (cli.given("--decode")) {
    if (device == "cpu" && decode == "trial")
      throw Error("--decode trial times a device's variants on the run (--device emu/cuda); on the CPU, "
                  "qbench --choose-decode ranks them into a tuned cache");
    if (cli.get_flag("--fuse-norm") || cli.get_flag("--pdl"))
      throw Error("--decode names the whole decode variant: give it or --fuse-norm/--pdl, not both");
    if (decode == "trial" && cli.given("--launch-times"))
      throw Error("--decode trial switches the decode variant on the way; --launch-times times one: give a variant");
  }
  run_opts.programmatic_launch = decode_variant ? decode_variant->pdl : cli.get_flag("--pdl");
  if (device != "cuda" && run_opts.programmatic_launch)
    throw Error(std::string(decode_variant ? "--decode " + decode + ": PDL" : "--pdl") + " is a CUDA GPU option (--device cuda)");
  run_opts.fuse_norm = decode_variant ? decode_variant->fuse_norm : cli.get_flag("--fuse-norm");
  if (device == "cpu" && run_opts.fuse_norm) throw Error("--fuse-norm is a device option (--device emu/cuda)");
  if (device != "emu" && cli.get_flag("--no-checks")) throw Error("--no-checks is an emulator option (--device emu)");
  if (device == "cpu" && cli.get_flag("--no-graphs")) throw Error("--no-graphs is a device option (--device emu/cuda)");
  if (device != "emu" && cli.given("--emu-arch")) throw Error("--emu-arch is an emulator option (--device emu)");
  run_opts.emu_arch = compile::parse_arch(cli.get("--emu-arch"));
  if (run_opts.emu_arch < 80) throw Error("--emu-arch: the emulator presents sm80, sm86, sm89 or sm90, not " + cli.get("--emu-arch"));
  const std::string layout = cli.get("--int8-layout");
  if (layout != "plain" && layout != "trtllm") throw Error("--int8-layout is plain or trtllm, got '" + layout + "'");
  if (device == "cpu" && cli.given("--int8-layout")) throw Error("--int8-layout is a device option (--device emu/cuda)");
  run_opts.trtllm_int8 = layout == "trtllm";
  run_opts.predequantize = cli.get_flag("--predequantize");
  if (device == "cpu" && run_opts.predequantize) throw Error("--predequantize is a device option (--device emu/cuda)");
  run_opts.prefill_f16 = cli.get_flag("--prefill-f16");
  if (device == "cpu" && run_opts.prefill_f16) throw Error("--prefill-f16 is a device option (--device emu/cuda)");
  if (run_opts.prefill_f16 && run_opts.predequantize)
    throw Error("--prefill-f16 keeps the quantized weights beside an fp16 copy; --predequantize keeps the fp16 alone: give one");
  const std::string weight_layout = cli.get("--weight-layout");
  if (weight_layout != "frag" && weight_layout != "file")
    throw Error("--weight-layout is frag or file, got '" + weight_layout + "'");
  if (device == "cpu" && cli.given("--weight-layout")) throw Error("--weight-layout is a device option (--device emu/cuda)");
  run_opts.frag_layout = weight_layout == "frag";
  if (run_opts.prefill_f16 && !run_opts.frag_layout)
    throw Error("--prefill-f16 keeps its copy beside the frag layout's weights: it cannot be given with --weight-layout file");
  if (run_opts.fuse_norm && (!run_opts.frag_layout || run_opts.predequantize))
    throw Error(std::string(decode_variant ? "--decode " + decode : "--fuse-norm") + " runs on the frag layout's GEMVs: it cannot be given with " +
                (run_opts.predequantize ? "--predequantize" : "--weight-layout file"));
  const std::string expert_layout = cli.get("--expert-layout");
  if (expert_layout != "frag" && expert_layout != "file" && expert_layout != "auto")
    throw Error("--expert-layout is auto, frag or file, got '" + expert_layout + "'");
  if (device == "cpu" && cli.given("--expert-layout")) throw Error("--expert-layout is a device option (--device emu/cuda)");
  if (expert_layout == "frag" && run_opts.trtllm_int8)
    throw Error("--expert-layout frag and --int8-layout trtllm each choose the experts' layout: give one");
  if (expert_layout != "auto") run_opts.frag_experts = expert_layout == "frag";
  // Layouts of experts this model does not have would be silently ignored.
  {
    const bool moe = cfg.is_moe();
    const WeightType experts = model_linear_type(file->weights());
    if (expert_layout == "frag" && (!moe || !kernels::frag::frag_layout_holds(experts)))
      throw Error(std::string("--expert-layout frag: ") +
                  (moe ? std::string("the frag layout holds AWQ, INT8 sym and Q8_0 experts, not ") + weight_type_name(experts)
                       : std::string("the model has no MoE experts")));
    if (run_opts.trtllm_int8 && (!moe || (experts != WeightType::INT8_GW_SYM && experts != WeightType::INT8_GW_ASYM)))
      throw Error(std::string("--int8-layout trtllm lays out INT8 group-wise experts; this model's ") +
                  (moe ? std::string("are ") + weight_type_name(experts) : std::string("has none")));
  }
  CpuOptions& opts = run_opts.cpu;
  opts.reference = cli.get_flag("--reference");
  if (cli.given("--threads")) {
    opts.threads = cli.get_int_as<int>("--threads");
    run_opts.emu_threads = opts.threads;
  }
  if (cli.given("--tuned-cache") && device != "cpu") run_opts.tuned_cache = cli.get("--tuned-cache");
  if (cli.get_flag("--no-stored-decode") && !cli.given("--tuned-cache"))
    throw Error("--no-stored-decode ignores a tuned cache's decode variant: it needs --tuned-cache");
  // On the CPU, a variant named here or the built-in one in place of the store's (apply_tuned_cache keeps it).
  if (device == "cpu" && (decode_variant || cli.get_flag("--no-stored-decode")))
    opts.decode_prefetch = decode_variant ? decode_variant->prefetch : DecodePrefetch::kL2;
  // The store's measured decode variant, unless the command line chose one.
  const bool chosen_here = decode_variant || cli.get_flag("--fuse-norm") || cli.get_flag("--pdl");
  if (!run_opts.tuned_cache.empty() && !cli.get_flag("--no-stored-decode") && !chosen_here && decode == "auto")
    run_opts.stored_decode = decode_step_key(file->weights());
  // The trial where nothing else chose: asked for, or by default on a GPU (not while --launch-times times one
  // variant's launches).
  run_opts.decode_trial = !chosen_here && (decode == "trial" || (decode == "auto" && device == "cuda" &&
                                                                  !cli.given("--launch-times")));
  if (cli.given("--tuned-cache") && device == "cpu") {
    if (opts.reference) throw Error("--tuned-cache tunes the fast path; it cannot be combined with --reference");
    const std::string summary = apply_tuned_cache(cli.get("--tuned-cache"), file->weights(), opts, cli.given("--threads"));
    std::fprintf(stderr, "qrun: %s\n", summary.c_str());
  }
  const SamplerConfig sampling = sampling_from(cli, think);

  if (ids_mode) {
    std::vector<int32_t> ids;
    for (int64_t v : parse_int_list(cli.get("--prompt-ids"), "--prompt-ids")) {
      if (v < 0 || v >= cfg.vocab_size)
        throw Error("--prompt-ids: token id " + std::to_string(v) + " is outside the vocabulary [0, " +
                    std::to_string(cfg.vocab_size) + ")");
      ids.push_back(int32_t(v));
    }
    if (ids.empty()) throw Error("--prompt-ids: no token ids given");
    if (int64_t(ids.size()) > context)
      throw Error("the prompt (" + std::to_string(ids.size()) + " tokens) is longer than the context (" +
                  std::to_string(context) + " tokens)");
    RunDevice run_device = make_run_device(run_opts);
    note_untried_trial(decode, run_device);
    Qwen3Model model(file->weights(), *run_device.backend, context);
    if (cli.given("--logits-out")) {
      write_logits(cli.get("--logits-out"), model.forward(ids, LogitsRows::kAll));
      if (n_predict == 0) {
        if (cli.given("--launch-times")) write_launch_times(cli.get("--launch-times"), run_device);
        return 0;
      }
      model.reset();
    }
    Sampler sampler(sampling);
    std::vector<int32_t> history;
    const TurnResult r = generate_turn(model, sampler, ids, n_predict, {}, history, [](int32_t tok) {
      std::printf("%d\n", tok);
      std::fflush(stdout);
    }, run_device.decode_step_observer());
    if (!cli.get_flag("--no-stats")) print_stats(r.stats, sampling.seed);
    report_device(run_device, cli.get_flag("--verbose"));
    if (cli.given("--launch-times")) write_launch_times(cli.get("--launch-times"), run_device);
    return 0;
  }

  TokenizerSession session(cli.given("--tokenizer") ? cli.get("--tokenizer") : "", model_path, cfg.vocab_size);
  RunDevice run_device = make_run_device(run_opts);
  note_untried_trial(decode, run_device);
  Qwen3Model model(file->weights(), *run_device.backend, context);
  Sampler sampler(sampling);
  ChatState chat;
  chat.system = cli.given("--system") ? cli.get("--system") : "";
  chat.think = think;
  chat.raw = cli.get_flag("--raw");
  const bool stats = !cli.get_flag("--no-stats");

  auto turn = [&](const std::string& message) {
    std::vector<int32_t> prompt = session.turn_tokens(chat, message);
    if (int64_t(prompt.size()) + model.position() > context) {
      if (model.position() == 0 || !cli.get_flag("--interactive"))
        throw Error("the prompt (" + std::to_string(prompt.size()) + " tokens) is longer than the context (" +
                    std::to_string(context) + " tokens)");
      std::fprintf(stderr, "qrun: the conversation no longer fits the context of %lld tokens; starting over\n",
                   static_cast<long long>(context));
      model.reset();
      chat.reset();
      prompt = session.turn_tokens(chat, message);
      if (int64_t(prompt.size()) > context) throw Error("the message is longer than the context");
    }
    StreamPrinter printer(session);
    const TurnResult r = generate_turn(model, sampler, prompt, n_predict, session.end_tokens(), chat.history,
                                       [&](int32_t t) { printer.push(t); }, run_device.decode_step_observer());
    printer.finish();
    chat.after_turn(r.tokens, session.end_tokens());
    if (stats) print_stats(r.stats, sampling.seed);
  };

  if (cli.given("--prompt")) turn(cli.get("--prompt"));
  if (cli.get_flag("--interactive")) {
    std::string line;
    for (;;) {
      std::fputs("> ", stderr);
      if (!std::getline(std::cin, line) || line == "/exit") break;
      if (line == "/reset") {
        model.reset();
        chat.reset();
        continue;
      }
      if (line.empty()) continue;
      // A message the model cannot take (not UTF-8, longer than the context) is refused, and the chat goes on;
      // a failure after the model started on it leaves a state no later turn can trust, so the chat restarts.
      const int64_t before = model.position();
      try {
        turn(line);
      } catch (const Error& e) {
        if (e.exit_code() != kExitBadInput) throw;
        const bool restart = model.position() != before;
        std::fprintf(stderr, "qrun: %s; %s\n", e.what(),
                     restart ? "starting the conversation over" : "the message was not sent");
        if (restart) {
          model.reset();
          chat.reset();
        }
      }
    }
  }
  if (stats) report_device(run_device, cli.get_flag("--verbose"));
  if (cli.given("--launch-times")) write_launch_times(cli.get("--launch-times"), run_device);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return qt::run_tool("qrun", [&] { return run(argc, argv); }); }
