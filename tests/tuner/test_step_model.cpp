// The static model's whole-step prediction (tuner/static/step_predict.h): the launch list the runtime issues,
// the in-stream launch cost re-derived from the H200 run's figures, and the predicted decode and prefill
// against what that run measured (tests/tuner/data/h200-2026-11-26-step.json, tests/tuner/data/README.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "models/synthetic/presets.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/registry/registry.h"
#include "tuner/static/roofline.h"
#include "tuner/static/step_predict.h"

using namespace qt;
using namespace qt::tune;

namespace {

nlohmann::json fixture(const std::string& name = "h200-2026-11-26-step.json") {
  std::ifstream in(source_root() + "/tests/tuner/data/" + name);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

GpuPeaks h200(const nlohmann::json& fx) {
  const nlohmann::json& d = fx.at("device");
  dev::DeviceFingerprint f;
  f.name = d.at("name"), f.arch = d.at("arch"), f.sm_count = d.at("sm_count");
  f.mem_clock_mhz = d.at("mem_clock_mhz"), f.bus_width_bits = d.at("bus_width_bits");
  return gpu_peaks(f);
}

// The run's models: `qconvert synthetic --preset qwen3-8b --layers 12` as ak48 (AWQ) and ajc1 (Q8_0), and
// qwen3-30b-a3b with 4 layers as moe3 with AWQ experts, on the runtime of commit b80cebf: q/k/v and gate/up
// were separate launches, Q8_0 was not yet held in the frag layout, and prefill kept quantized weights on the
// GEMM families.
StepSpec run_model(WeightType dense, bool decode, int64_t tokens) {
  StepSpec s;
  s.config = synthetic::preset_config("qwen3-8b");
  s.config.n_layers = 12;
  s.weights.dense = dense;
  s.weights.dense_group = dense == WeightType::Q8_0 ? 64 : 128;
  if (dense == WeightType::Q8_0) {
    s.weights.embedding = s.weights.head = WeightType::Q8_0;
    s.weights.embedding_group = s.weights.head_group = 64;
  }
  s.runtime.concatenate_qkv = s.runtime.concatenate_gate_up = false;
  s.runtime.frag_layout = dense != WeightType::Q8_0;
  s.runtime.dequant_blas = false;
  s.runtime.prefill_chunk = 256;
  s.runtime.register_ring = s.runtime.gemv_first = true;
  s.decode = decode;
  s.context = tokens;
  return s;
}

// The run decoded 64 tokens at positions 128-191.
constexpr int64_t kRunContext = 160;

}  // namespace

TEST_CASE("step launches: decode of the 8B shape as the runtime issues it", "[tuner][step]") {
  StepSpec s;
  s.config = synthetic::preset_config("qwen3-8b");
  s.context = 4096;
  const std::vector<StepLaunch> l = step_launches(s);
  int64_t total = 0;
  for (const StepLaunch& x : l) total += x.count;
  // embedding, 2 norms + q|k|v + rope + attention + o + gate|up + down per layer, final norm, lm_head, argmax
  CHECK(total == 1 + 36 * 8 + 3);
  bool qkv = false, fused = false;
  for (const StepLaunch& x : l) {
    if (x.what == "q|k|v") qkv = x.op == "linear.frag" && x.shape["N"] == 4096 + 2 * 1024;
    if (x.op == "gate_up_swiglu.frag") fused = x.shape["N"] == 12288;
    if (x.op == "attention_decode") CHECK(x.shape["P"] == 4096);
  }
  CHECK(qkv);
  CHECK(fused);
  s.runtime.concatenate_qkv = s.runtime.concatenate_gate_up = false;
  total = 0;
  for (const StepLaunch& x : step_launches(s)) total += x.count;
  CHECK(total == 1 + 36 * 12 + 3);  // q, k, v apart; gate, up and SwiGLU apart
}

TEST_CASE("step launches: prefill runs chunks of 1024 with cuBLASLt and 256 without and the lm_head once",
          "[tuner][step]") {
  StepSpec s;
  s.config = synthetic::preset_config("qwen3-8b");
  s.runtime.predequantize = true;
  s.decode = false;
  s.context = 1536;
  int64_t heads = 0, blas = 0;
  std::vector<int64_t> rows;
  for (const StepLaunch& x : step_launches(s)) {
    if (x.what == "lm_head") {
      heads += x.count;
      CHECK(x.op == "linear");  // one row: the fp16 GEMV
    }
    if (x.op == "cublaslt") {
      blas += x.count;
      rows.push_back(x.shape["M"]);
    }
  }
  CHECK(heads == 1);
  CHECK(blas == 2 * 36 * 7);  // q, k, v, o, gate, up and down apart: no fused GEMV above 16 rows
  CHECK(std::count(rows.begin(), rows.end(), 1024) == 7);
  CHECK(std::count(rows.begin(), rows.end(), 512) == 7);
  // Quantized weights from 64 rows: each projection is its dequant, then a cuBLASLt GEMM.
  s.runtime.predequantize = false;
  s.context = 512;
  int64_t dequant = 0, gemm = 0, families = 0;
  for (const StepLaunch& x : step_launches(s)) {
    dequant += x.op == "dequant.frag" ? x.count : 0;
    gemm += x.op == "cublaslt" ? x.count : 0;
    families += x.op.starts_with("linear") ? x.count : 0;
  }
  CHECK(dequant == 36 * 7);  // q, k, v, o, gate, up and down, as above
  CHECK(gemm == 36 * 7);
  CHECK(families == 1);      // the lm_head's one row
  // Without cuBLASLt, chunks of 256 on the families.
  s.runtime.blas = false;
  int64_t chunks = 0;
  for (const StepLaunch& x : step_launches(s)) chunks += x.what == "down_proj" ? x.count : 0;
  CHECK(chunks == 2 * 36);
}

TEST_CASE("stream launch cost re-derived from the H200 run", "[tuner][step]") {
  // The 12-layer AWQ decode took 1/446 s a token. Its linears' times are measured (event times, less the
  // launch cost events add: launch_us); the other kernels' are the model's. What is left, over the run's
  // launches, is what a launch in the step's stream costs beyond its memory time.
  const nlohmann::json fx = fixture();
  const nlohmann::json& run = fx.at("dense_8b_12_layers");
  GpuPeaks peak = h200(fx);
  const StepPrediction p = predict_step(run_model(WeightType::AWQ_INT4, true, kRunContext), 90, peak);
  double bodies = 0;
  int64_t launches = 0;
  for (const LaunchPrediction& l : p.launches) {
    launches += l.launch.count * l.by_default.launches;
    double body = l.by_default.e.seconds - l.by_default.e.launch_s;
    if (l.launch.op.starts_with("linear")) {
      bool found = false;
      for (const nlohmann::json& k : run.at("kernels"))
        if (k.at("M") == 1 && k.at("N") == l.launch.shape["N"] && k.at("K") == l.launch.shape["K"]) {
          body = k.at("default_us").get<double>() * 1e-6 - peak.launch_us * 1e-6;
          found = true;
        }
      REQUIRE(found);
    }
    // The run's flash-decoding took the fixed 8 splits of that day's default (today's default scales the
    // split count with the context): modelled at the point that ran.
    if (l.launch.op == "attention_decode") {
      const kernels::KernelFamily& f = kernels::find_family("attention_decode");
      const kernels::Point ran = kernels::parse_point(f, "threads=128,tile=32,stages=2,splits=8,mma=0");
      const RooflineEstimate e = estimate_point(f, ran, l.launch.shape, 90, peak);
      body = e.seconds - e.launch_s;
    }
    bodies += double(l.launch.count) * body;
  }
  // b80cebf's flash-decoding combined its splits in a second launch per layer; today's does it in the same one.
  launches += 12;
  const double step = 1.0 / run.at("end_to_end").at("AWQ default").at("decode_tok_s").get<double>();
  const double per_launch_us = (step - bodies) / double(launches) * 1e6;
  INFO("derived " << per_launch_us << " us per launch");
  CHECK(per_launch_us == Approx(peak.stream_launch_us).margin(0.05));
}

namespace {

// The run's 4-layer 30B-A3B model (moe3): Q8_0 attention, router, embedding and lm_head (group 64), AWQ experts
// in the file's group, on b80cebf's runtime (Q8_0 in the file layout, q/k/v apart).
StepSpec run_moe(bool decode, int64_t tokens) {
  StepSpec s;
  s.config = synthetic::preset_config("qwen3-30b-a3b");
  s.config.n_layers = 4;
  StepWeights& w = s.weights;
  w.dense = w.embedding = w.head = w.router = WeightType::Q8_0;
  w.dense_group = w.embedding_group = w.head_group = w.router_group = 64;
  w.expert = WeightType::AWQ_INT4, w.expert_group = 64;
  s.runtime.concatenate_qkv = s.runtime.concatenate_gate_up = false;
  s.runtime.frag_layout = false;
  s.runtime.dequant_blas = false;
  s.runtime.prefill_chunk = 256;
  s.runtime.register_ring = s.runtime.gemv_first = true;
  s.decode = decode;
  s.context = tokens;
  return s;
}

// A prediction is held to the run within [lo, hi] times its measured tok/s.
struct Case {
  const char* what;
  StepSpec spec;
  const char* group;    // the fixture's model
  const char* model;    // its end-to-end entry
  const char* prefill;  // the prefill's tokens, or null for decode
  double lo, hi;
};

double measured(const nlohmann::json& fx, const Case& c) {
  const nlohmann::json& e = fx.at(c.group).at("end_to_end").at(c.model);
  return c.prefill ? e.at("prefill_tok_s").at(c.prefill).get<double>() : e.at("decode_tok_s").get<double>();
}

StepSpec predequantized(StepSpec s) {
  s.runtime.predequantize = true;
  return s;
}

void check_cases(const std::vector<Case>& cases, const std::string& run = "h200-2026-11-26-step.json") {
  const nlohmann::json fx = fixture(run);
  const GpuPeaks peak = h200(fx);
  // As qtune static --step predicts: each launch's chosen point compiled for its registers and loop.
  compile::CompileService service;
  for (const Case& c : cases) {
    const double predicted = predict_step(c.spec, 90, peak, &service).default_tok_s(), m = measured(fx, c);
    std::printf("%-16s predicted %10.1f tok/s, measured %10.1f: %.2fx\n", c.what, predicted, m, predicted / m);
    INFO(c.what << ": predicted " << predicted << " tok/s, measured " << m);
    CHECK(predicted >= c.lo * m);
    CHECK(predicted <= c.hi * m);
  }
}

constexpr const char* kDense = "dense_8b_12_layers";

}  // namespace

// Decode is mostly GEMVs at M = 1, where the model is pessimistic on the H200 (it predicts the frag GEMV's and
// the fp16 GEMV's event times 10-60% slow): within 25%.
TEST_CASE("predicted decode against the H200 run", "[tuner][step]") {
  check_cases({
      {"AWQ decode", run_model(WeightType::AWQ_INT4, true, kRunContext), kDense, "AWQ default", nullptr, 0.75, 1.25},
      {"Q8_0 decode", run_model(WeightType::Q8_0, true, kRunContext), kDense, "Q8_0", nullptr, 0.75, 1.25},
      {"FP16 decode", predequantized(run_model(WeightType::AWQ_INT4, true, kRunContext)), kDense, "FP16", nullptr, 0.75,
       1.25},
  });
}

// Prefill on cuBLASLt is modelled as a roofline at kCublasLtEfficiency: within 15%. On our mma.sync GEMM the model
// was optimistic by up to 3x until it charged each row block's L2 re-read of the weights through the loads in
// flight (roofline.h); the AWQ prefill is held within 30% since. The MoE decode is predicted too fast, for
// reasons not yet known (below 2x).
TEST_CASE("predicted prefill and MoE decode against the H200 run", "[tuner][step]") {
  check_cases({
      {"FP16 pp512", predequantized(run_model(WeightType::AWQ_INT4, false, 512)), kDense, "FP16", "512", 0.85, 1.15},
      {"FP16 pp128", predequantized(run_model(WeightType::AWQ_INT4, false, 128)), kDense, "FP16", "128", 0.85, 1.15},
      {"AWQ pp512", run_model(WeightType::AWQ_INT4, false, 512), kDense, "AWQ default", "512", 0.7, 1.3},
      {"AWQ pp128", run_model(WeightType::AWQ_INT4, false, 128), kDense, "AWQ default", "128", 0.7, 1.3},
      {"MoE AWQ decode", run_moe(true, kRunContext), "moe_30b_a3b_4_layers", "AWQ default", nullptr, 1.0, 2.0},
  });
}

namespace {

// The second H200 run's models (tests/tuner/data/h200-2026-11-27-step.json) on the runtime of its commit,
// 5355fe8: q/k/v and gate/up concatenated, dense AWQ and Q8_0 in the frag layout, MoE experts in the file layout,
// quantized prefill on the GEMM families.
StepSpec run2_dense(WeightType dense, bool decode, int64_t tokens) {
  StepSpec s;
  s.config = synthetic::preset_config("qwen3-8b");
  s.weights.dense = dense;
  s.weights.dense_group = dense == WeightType::Q8_0 ? 64 : 128;
  if (dense == WeightType::Q8_0) {
    s.weights.embedding = s.weights.head = WeightType::Q8_0;
    s.weights.embedding_group = s.weights.head_group = 64;
  }
  s.runtime.dequant_blas = false;
  s.runtime.prefill_chunk = 256;
  s.runtime.register_ring = s.runtime.gemv_first = true;
  s.decode = decode;
  s.context = tokens;
  return s;
}

StepSpec run2_moe(bool decode, int64_t tokens) {
  StepSpec s = run_moe(decode, tokens);
  s.config.n_layers = 8;
  s.weights.expert = WeightType::Q8_0;
  s.runtime.concatenate_qkv = s.runtime.concatenate_gate_up = true;
  s.runtime.frag_layout = true;
  return s;
}

constexpr const char* kRun2 = "h200-2026-11-27-step.json";
constexpr const char* kDense36 = "dense_8b_36_layers";
// tg128 after the 128-token prompt: positions 128-255.
constexpr int64_t kRun2Context = 192;

}  // namespace

// The second run, with all 36 layers and the concatenated projections, holds the model to the same bands as
// the first: decode within 25%, cuBLASLt prefill within 15%, the mma.sync GEMM's prefill within 30%, and the
// MoE decode optimistic by at most 2x. The MoE prefill ran its experts on the file layout's grouped GEMMs, which
// the step model prices 2-3x fast: `qtune static --against` puts them at about 0.45x even with their loops' issue
// charged: optimistic by at most 2.5x (1.72x). Q8_0 decode, now on q8_0_frag_gemv (the first run had Q8_0
// in the file layout), was predicted 0.71x until the model stated an INT8 tile's bytes in flight (1.00x since).
// Since the frag GEMVs are priced as a chain of waits (30 Nov), the model times the third run's GEMV launches
// within 4% (15.1, 15.1 and 29.5 us against 15.7, 15.1 and 29.6 measured), where it put them 1.3-1.5x slow
// before; that slowness had hidden the gate|up stream GEMV's optimism (19.5 us against 38.1 measured, 36 a
// step). With each launch's point compiled for its registers and the stream GEMVs' loads in flight capped (30 Nov,
// second session), gate|up is 25 us and dense decode 1.16x (AWQ) and 1.06x (Q8_0), 1.27x and 1.25x before.
TEST_CASE("predicted decode and prefill against the second H200 run", "[tuner][step]") {
  check_cases(
      {
          {"AWQ decode", run2_dense(WeightType::AWQ_INT4, true, kRun2Context), kDense36, "AWQ default", nullptr, 0.75, 1.25},
          {"Q8_0 decode", run2_dense(WeightType::Q8_0, true, kRun2Context), kDense36, "Q8_0", nullptr, 0.75, 1.25},
          {"FP16 decode", predequantized(run2_dense(WeightType::AWQ_INT4, true, kRun2Context)), kDense36, "FP16", nullptr,
           0.75, 1.25},
          {"FP16 pp512", predequantized(run2_dense(WeightType::AWQ_INT4, false, 512)), kDense36, "FP16", "512", 0.85, 1.15},
          {"AWQ pp512", run2_dense(WeightType::AWQ_INT4, false, 512), kDense36, "AWQ default", "512", 0.7, 1.3},
          {"Q8_0 pp512", run2_dense(WeightType::Q8_0, false, 512), kDense36, "Q8_0", "512", 0.7, 1.3},
          {"MoE Q8_0 decode", run2_moe(true, kRun2Context), "moe_30b_a3b_8_layers", "Q8_0 default", nullptr, 1.0, 2.0},
          {"MoE Q8_0 pp512", run2_moe(false, 512), "moe_30b_a3b_8_layers", "Q8_0 default", "512", 1.0, 2.5},
      },
      kRun2);
}

TEST_CASE("an untuned decode step runs its quantized projections on the stream GEMVs, the shared ring at groups of "
          "64 too, and --gemv-first puts them back on the frag GEMVs the H200 runs ran",
          "[tuner][step]") {
  // The runtime's preference without a tuned store is registry order (kernel_choice.h): the stream GEMVs come
  // first since the third H200 run timed them faster on o_proj, down_proj and k/v (results/stream-gemv-default.md).
  for (const bool q8 : {false, true}) {
    StepSpec s;
    s.config = synthetic::preset_config("qwen3-8b");
    s.config.n_layers = 1;
    s.context = 128;
    if (q8) s.weights.dense = WeightType::Q8_0, s.weights.dense_group = 64;
    const std::string stream = q8 ? "q8_0_frag_stream_gemv" : "awq_frag_stream_gemv";
    const std::string gemv = q8 ? "q8_0_frag_gemv" : "awq_frag_gemv";
    for (const bool gemv_first : {false, true}) {
      s.runtime.gemv_first = gemv_first;
      const StepPrediction p = predict_step(s, 90, gpu_peaks(90));
      int projections = 0;
      for (const LaunchPrediction& l : p.launches) {
        if (l.launch.op != "linear.frag") continue;
        INFO(l.launch.what << " q8=" << q8 << " gemv_first=" << gemv_first);
        ++projections;
        CHECK(l.by_default.family == (gemv_first ? gemv : stream));
        // Q8_0's groups of 64 hold 4 steps: the shared ring 4 deep, not the register ring after it.
        if (!gemv_first) CHECK(kernels::frag::stream_ring(l.by_default.at) == 1);
      }
      CHECK(projections == 3);  // q|k|v, o_proj, down_proj
    }
  }
}

TEST_CASE("qtune static --step prints and writes the step prediction", "[tuner][step][cli]") {
  const std::string json = test::tuner_scratch("step-static", ".json");
  const std::string store = source_root() + "/tests/tuner/data/h200-2026-11-26-8b-frag.sqlite";
  const test::QtuneRun r = test::run_qtune("static --gpu sm90 --step decode --preset qwen3-8b --layers 2 "
                                           "--fingerprint-store " + store + " --json " + json);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("PREDICTION") != std::string::npos);
  CHECK(r.out.find("NVIDIA H200") != std::string::npos);
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["prediction"] == true);
  CHECK(j["best_tok_s"].get<double>() >= j["default_tok_s"].get<double>());
  CHECK(j["default_roofline_share"].get<double>() > 0);
  CHECK(j["default_roofline_share"].get<double>() < 1);
  // The store is read, never written: no -wal or -shm appears beside it.
  CHECK(!std::filesystem::exists(store + "-wal"));
  CHECK(!std::filesystem::exists(store + "-shm"));
  // --launch-us replaces the calibrated launch cost, says so, and moves the step by the launches times the
  // difference (the kernels' bodies unchanged); it needs --step.
  const std::string what_if = test::tuner_scratch("step-static-launch", ".json");
  const test::QtuneRun w = test::run_qtune("static --gpu sm90 --step decode --preset qwen3-8b --layers 2 "
                                           "--fingerprint-store " + store + " --launch-us 1.5 --json " + what_if);
  REQUIRE(w.rc == 0);
  CHECK(w.out.find("1.5 us per launch in a stream, given by --launch-us, not calibrated") != std::string::npos);
  std::ifstream win(what_if);
  const nlohmann::json wj = nlohmann::json::parse(win);
  const double launches = wj["default_launches"].get<double>();
  CHECK(launches > 0);
  CHECK(wj["stream_launch_us"] == 1.5);
  CHECK(j["default_us"].get<double>() - wj["default_us"].get<double>() ==
        Approx(launches * (j["stream_launch_us"].get<double>() - 1.5)).epsilon(1e-6));
  CHECK(test::run_qtune("static --gpu sm90 --launch-us 2 --kernel awq_frag_gemv").rc == 2);
  CHECK(test::run_qtune("static --gpu sm90 --step decode --launch-us -1").rc == 2);
  // A model file's own shapes and types.
  const test::QtuneRun file = test::run_qtune("static --gpu sm90 --step prefill --prompt 20 --model " + source_root() +
                                              "/tests/golden/files/moe-norm.awq.moe3");
  CHECK(file.rc == 0);
  CHECK(file.out.find("experts gate|up") != std::string::npos);
  CHECK(test::run_qtune("static --gpu sm90 --step decode --model x.bin --preset qwen3-8b").rc == 2);
  // Step flags need --step; the per-family table's flags do not go with it.
  CHECK(test::run_qtune("static --gpu sm90 --preset qwen3-8b").rc == 2);
  CHECK(test::run_qtune("static --gpu sm90 --step decode --kernel awq_frag_gemv").rc == 2);
  CHECK(test::run_qtune("static --gpu sm90 --step sideways").rc == 2);
}

// Untuned, sm_90 runs a quantized projection from 64 rows as its dequant then cuBLASLt, and the step model prices
// that route, its model-best included: it never replaces the pair with a GEMM family. --no-dequant-blas prices
// the projections on the GEMM families instead, as a tuned dispatch that chose them runs. Which GEMM family is
// the model's best is not held here: since the wgmma GEMMs are charged their loop's issue time (30 Nov), the
// static instruction count decides it, and that count includes code a branch skips (results/wgmma-weight-ring.md).
TEST_CASE("qtune static --step --no-dequant-blas prices a prefill's projections on the GEMM families, not dequant + "
          "cuBLASLt", "[tuner][step][cli]") {
  auto launches = [](const std::string& extra) {
    const std::string json = test::tuner_scratch("step-route", ".json");
    const test::QtuneRun r = test::run_qtune("static --gpu sm90 --step prefill --preset qwen3-8b --layers 2 --prompt 512 "
                                             "--json " + json + extra);
    REQUIRE(r.rc == 0);
    std::ifstream in(json);
    return nlohmann::json::parse(in)["launches"];
  };
  int dequant = 0, blas = 0;
  for (const nlohmann::json& l : launches("")) {
    dequant += l["op"].get<std::string>().find("dequant") != std::string::npos;
    blas += l["op"] == "cublaslt";
  }
  CHECK(dequant > 0);
  CHECK(blas >= dequant);
  int gemms = 0;
  for (const nlohmann::json& l : launches(" --no-dequant-blas")) {
    INFO(l["what"] << ": " << l["op"]);
    CHECK(l["op"].get<std::string>().find("dequant") == std::string::npos);
    if (l["op"] != "linear.frag") continue;
    ++gemms;
    const std::string best = l["best"]["family"];
    CHECK((best == "awq_frag_wgmma_gemm" || best == "awq_frag_gemm" || best == "awq_frag_smem_gemm"));
  }
  CHECK(gemms >= 4);  // q|k|v, o_proj, gate|up, down
}

TEST_CASE("qtune static --step --prefill-f16 runs a prefill's projections on cuBLASLt over the fp16 copy, as the "
          "predequantized model does, and leaves decode on the quantized weights", "[tuner][step][cli]") {
  auto step = [](const std::string& args) {
    const std::string json = test::tuner_scratch("step-copy", ".json");
    const test::QtuneRun r = test::run_qtune("static --gpu sm90 --preset qwen3-8b --layers 2 --no-registers --json " +
                                             json + " " + args);
    INFO(args << "\n" << r.out);
    REQUIRE(r.rc == 0);
    std::ifstream in(json);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json copy = step("--step prefill --prompt 512 --prefill-f16");
  const nlohmann::json f16 = step("--step prefill --prompt 512 --predequantize");
  const nlohmann::json quantized = step("--step prefill --prompt 512");
  int dequant = 0, blas = 0;
  for (const nlohmann::json& l : copy["launches"]) {
    dequant += l["op"].get<std::string>().find("dequant") != std::string::npos;
    blas += l["op"] == "cublaslt";
  }
  CHECK(dequant == 0);
  CHECK(blas >= 5);  // q, k, v, o, gate, up, down (the lm_head's one row stays on the GEMV)
  // The same launches and time as the predequantized prefill (the preset's lm_head is fp16 either way).
  CHECK(copy["default_us"].get<double>() == Approx(f16["default_us"].get<double>()).epsilon(1e-9));
  CHECK(copy["default_us"].get<double>() < quantized["default_us"].get<double>());
  // Decode reads the quantized weights: the copy changes nothing there.
  CHECK(step("--step decode --prefill-f16")["default_us"] == step("--step decode")["default_us"]);
  CHECK(test::run_qtune("static --gpu sm90 --step prefill --prefill-f16 --predequantize").rc == 2);
  CHECK(test::run_qtune("static --gpu sm90 --step prefill --prefill-f16 --weight-layout file").rc == 2);
}

TEST_CASE("the tuner measures attention decode at the shapes the runtime chooses by at 512, 4K and 32K tokens",
          "[tuner][step]") {
  // A tuned attention winner is found exactly only if the tuner stored it under the choice shape: the context
  // bucket's rows, the query at their end, as DeviceBackend::attention and the step model both build it; here
  // the step model's choice shapes are the family's model shapes.
  const kernels::KernelFamily& f = kernels::find_family("attention_decode");
  StepSpec s;
  s.config = synthetic::preset_config("qwen3-8b");
  const std::vector<kernels::Shape> tuned = f.model_shapes(s.config, nullptr);
  REQUIRE(tuned.size() == 3);
  for (const kernels::Shape& t : tuned) {
    INFO(t.label);
    s.context = t["C"] - 1;  // tokens already cached: this step's query makes C
    bool found = false;
    for (const StepLaunch& l : step_launches(s))
      if (l.op == "attention_decode") {
        found = true;
        CHECK(l.choice_shape.values == t.values);
      }
    CHECK(found);
  }
}

TEST_CASE("qtune static --step compiles the points it settles on: gate|up's 249 registers are priced, and its "
          "launch comes within 0.6-1.25x of the third H200 run's, where threads alone put it at half",
          "[tuner][step][cli]") {
  // The gate|up GEMV's registers allow two 128-thread blocks an SM: 8 warps, 3 waves of its 768 blocks. Left
  // uncompiled, the model took the SM's whole thread budget for it (results/gpu-h200-2026-11-29: 38.1 us a launch
  // measured, 19.5 predicted).
  const std::string run = source_root() + "/results/gpu-h200-2026-11-29";
  const std::string args = "static --gpu sm90 --step decode --preset qwen3-8b --fingerprint-store " + run +
                           "/qtune-cache.sqlite --register-ring --gemv-first --against-launches " + run + "/logs/launch-times-8b.json --json ";
  auto gate_up = [](const nlohmann::json& j, const char* field) {
    for (const nlohmann::json& l : j["launches"])
      if (l["what"] == "gate|up + SwiGLU") return l["default"].value(field, nlohmann::json());
    FAIL("no gate|up launch");
    return nlohmann::json();
  };
  auto ratio = [](const nlohmann::json& j) {
    for (const nlohmann::json& k : j["against_launches"]["kernels"])
      if (k["kernel"] == "frag_stream_gemv_kernel<4, 4, 4, 2, 1>")
        return k["predicted_s"].get<double>() / k["measured_s"].get<double>();
    FAIL("gate|up's kernel not timed in the launch-times file");
    return 0.0;
  };
  const std::string with = test::tuner_scratch("step-registers", ".json"), without = test::tuner_scratch("step-noregs", ".json");
  const test::QtuneRun r = test::run_qtune(args + with);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("registers: each launch's chosen points compiled by NVRTC for sm_90") != std::string::npos);
  const test::QtuneRun n = test::run_qtune(args + without + " --no-registers");
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("registers are not compiled in (--no-registers)") != std::string::npos);
  std::ifstream a(with), b(without);
  const nlohmann::json jw = nlohmann::json::parse(a), jn = nlohmann::json::parse(b);
  CHECK(gate_up(jw, "registers").get<int>() >= 200);
  CHECK(gate_up(jn, "registers").is_null());
  INFO("gate|up predicted/measured: " << ratio(jw) << " compiled, " << ratio(jn) << " threads alone");
  CHECK(ratio(jw) >= 0.6);
  CHECK(ratio(jw) <= 1.25);
  CHECK(ratio(jn) < 0.6);
}
