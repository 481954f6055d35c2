// qbench: prefill and decode speed of the CPU runtime on a model file (or a synthetic model of a real
// Qwen3 shape it creates), and decode speed as a fraction of the memory-bandwidth roofline measured in the
// same process: roofline tok/s = measured read bandwidth / weight bytes one decode step reads.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/progress.h"
#include "models/formats/model_file.h"
#include "models/synthetic/presets.h"
#include "models/synthetic/synthetic.h"
#include "runtime/cli/bandwidth.h"
#include "runtime/cpu/cpu_backend.h"
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

// Creates the synthetic model file the flags describe, unless it is already there.
std::string synthetic_model(const CliArgs& cli) {
  ModelConfig c = synthetic::preset_config(cli.get("--preset"));
  if (cli.given("--layers")) c.n_layers = cli.get_int_as<int32_t>("--layers");
  if (c.n_layers <= 0) throw Error("--layers must be positive");
  WriterOptions o;
  o.config = c;
  o.format = c.is_moe() ? FileFormat::MOE3 : FileFormat::AJC1;
  if (cli.given("--format")) o.format = parse_file_format(cli.get("--format"));
  if (cli.given("--expert-type")) o.expert_type = expert_type_of(cli.get("--expert-type"));
  const std::string dir = cli.get("--work-dir");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + cli.get("--preset") + "-L" + std::to_string(c.n_layers) + "-" +
                           file_format_name(o.format) + "-" + weight_type_name(o.expert_type) + ".bin";
  if (std::filesystem::exists(path)) return path;
  std::fprintf(stderr, "qbench: creating %s (synthetic, seed 1)\n", path.c_str());
  synthetic::write_model_file(path + ".tmp", o, 1, false);
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

int run(int argc, char** argv) {
  CliArgs cli("qbench", "Measures prefill/decode tok/s of the CPU runtime and the decode memory-bandwidth roofline.");
  cli.option("-m,--model", "PATH", "model file to benchmark (else a synthetic --preset model is created)")
      .option("--preset", "NAME", "synthetic shape: qwen3-0.6b, qwen3-30b-a3b, ...", "qwen3-0.6b")
      .option("--layers", "N", "override the preset's layer count")
      .option("--format", "F", "ajc1, moe3 or ak48 (default: ajc1 dense, moe3 MoE)")
      .option("--expert-type", "T", "moe3 experts: q8_0, int8-sym, int8-asym, awq", "q8_0")
      .option("--work-dir", "DIR", "where synthetic models are created and kept", "/tmp/qbench-models")
      .option("--prompt", "N", "prompt tokens for the prefill measurement", "128")
      .option("--gen", "N", "decode steps measured after the prefill", "32")
      .option("--repeat", "R", "repetitions (best is reported)", "3")
      .option("--threads", "N", "threads (default: all)")
      .flag("--reference", "benchmark the reference path instead of the fast one")
      .option("--bandwidth-mb", "MB", "buffer for the bandwidth measurement; 0 skips it (no roofline), so the peak RSS is the runtime's own", "512")
      .option("--context", "N", "KV-cache limit in tokens (default: prompt + gen + 1); the cache grows up to it as tokens come")
      .option("--kv", "T", "fast path's KV-cache type: f16 or f32 (default: f16, f32 for MoE models)")
      .flag("--json", "print one JSON object instead of text");
  if (!cli.parse(argc, argv)) return 0;
  const int64_t prompt = cli.get_int("--prompt"), gen = cli.get_int("--gen"), repeat = cli.get_int("--repeat");
  if (prompt <= 0 || gen <= 0 || repeat <= 0) throw Error("--prompt, --gen and --repeat must be positive");

  const std::string path = cli.given("--model") ? cli.get("--model") : synthetic_model(cli);
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
  CpuBackend backend(opts);
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
  std::vector<int32_t> tokens(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i) tokens[size_t(i)] = int32_t((i * 7919 + 13) % c.vocab_size);

  double best_prefill = 0, best_decode = 0;
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
    t0 = Clock::now();
    for (int64_t i = 0; i < gen; ++i) {
      const int32_t tok = int32_t((i * 104729 + 7) % c.vocab_size);
      model.forward(&tok, 1, LogitsRows::kLast);
    }
    best_decode = std::max(best_decode, double(gen) / since(t0));
  }
  const uint64_t bytes = model.decode_weight_bytes();
  const double roofline = bw.read_gbps * 1e9 / double(bytes);
  // A model whose decode bytes fit in the last-level cache is not bound by DRAM bandwidth.
  const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  const bool fits_in_cache = l3 > 0 && bytes < 2 * uint64_t(l3);
  nlohmann::json j = {{"model", path},
                      {"arch", c.is_moe() ? "qwen3-moe" : "qwen3"},
                      {"layers", c.n_layers},
                      {"file_bytes", file->file_size()},
                      {"backend", backend.name()},
                      {"kv_cache", act_type_name(backend.kv_type())},
                      {"context", context},
                      {"prepare_s", prepare_s},
                      {"prompt_tokens", prompt},
                      {"gen_tokens", gen},
                      {"prefill_tok_s", best_prefill},
                      {"decode_tok_s", best_decode},
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
  std::printf("backend      %s, KV cache %s (prepare %.2f s)\n", backend.name().c_str(),
              act_type_name(backend.kv_type()), prepare_s);
  if (bw_bytes > 0)
    std::printf("bandwidth    read %.2f GB/s, copy %.2f GB/s (%llu MB buffer, best of all repetitions)\n", bw.read_gbps,
                bw.copy_gbps, static_cast<unsigned long long>(bw.buffer_bytes >> 20));
  std::printf("prefill      %.1f tok/s (%lld-token prompt, best of %lld)\n", best_prefill,
              static_cast<long long>(prompt), static_cast<long long>(repeat));
  std::printf("decode       %.2f tok/s (%lld steps after the prompt, best of %lld)\n", best_decode,
              static_cast<long long>(gen), static_cast<long long>(repeat));
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
