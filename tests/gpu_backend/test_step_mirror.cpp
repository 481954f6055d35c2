// The static model's launch list of a step (tuner/static/step_launches.h) is written from what the device
// backend issues, since the tuner cannot link the runtime: this holds the two together. On the emulator (no
// graphs, so every launch is counted as it runs), a prompt and one decode step of golden models launch exactly
// the kernels the step model lists for them (the same name expressions, as often), at the families it picks. The step model is told that
// cuBLASLt is absent, as on the emulator; predequantized weights are left out.
#include <catch2/catch.hpp>

#include <map>

#include "common/paths.h"
#include "device/emu/emu_device.h"
#include "models/formats/model_file.h"
#include "runtime/gpu/device_backend.h"
#include "runtime/model/qwen3_model.h"
#include "tests/gpu_backend/backend_suite.h"
#include "tuner/static/step_against.h"
#include "tuner/static/step_predict.h"

using namespace qt;

namespace {

int64_t launches(const rt::DeviceBackend& d) { return d.launch_stats().launches + d.launch_stats().replayed_launches; }

struct Case {
  const char* file;
  bool frag;          // dense projections in the frag layout
  int arch = 80;      // the emulated architecture
  bool frag_experts = false;
  bool fuse_norm = false;  // a decode step's norms inside the stream GEMVs (DeviceBackendOptions::fuse_norm)
  bool prefill_f16 = false;  // an fp16 copy beside the frag weights for a prefill's GEMMs (prefill_f16)
  int64_t prompt = 5;        // prompt rows: the copy serves from blas::kF16CopyRows of them
};

tune::StepPrediction predict(const ModelWeights& w, const Case& c, bool decode, int64_t context) {
  tune::StepSpec s;
  s.config = w.config;
  s.weights = tune::step_weights(w);
  s.runtime.frag_layout = c.frag;
  s.runtime.frag_experts = c.frag_experts;
  s.runtime.fuse_norm = c.fuse_norm;
  s.runtime.prefill_f16 = c.prefill_f16;
  s.runtime.blas = false;  // the emulator has no cuBLASLt, so blas::default_route keeps every linear on the families
  s.decode = decode;
  s.context = context;
  return tune::predict_step(s, c.arch, tune::gpu_peaks(c.arch));
}

// The kernels a step launched, by name expression, and how many times each.
std::map<std::string, double> launched(const rt::DeviceBackend& d) {
  std::map<std::string, double> out;
  REQUIRE(!d.timed_steps().empty());
  for (const auto& l : d.timed_steps().back().launches) out[l.name] += 1;
  return out;
}

std::map<std::string, double> predicted(const tune::StepPrediction& p) {
  std::map<std::string, double> out;
  for (const auto& [name, k] : tune::predicted_kernels(p)) out[name] = k.predicted_launches;
  return out;
}

}  // namespace

TEST_CASE("step model: launches match the device backend", "[tuner][step]") {
  for (const Case& c : std::vector<Case>{
           {"dense-tied.ak48", true},  // q/k/v and gate/up concatenated in the frag layout
           {"dense.ak48", true},       // 160 + 80 + 80 columns: not whole tiles, so q, k and v apart
           {"dense.ak48", false},      // AWQ in its file layout (K-major): never concatenated
           {"dense-tied.ajc1", true},
           {"dense.ajc1", false},      // Q8_0 rows concatenated; the file layout's fused gate/up
           {"moe-norm.awq.moe3", true},
           {"moe-norm.int8-sym.moe3", false},
           {"moe-norm.awq.moe3", true, 90, true},  // experts on the wgmma grouped GEMMs
           {"dense-tied.ak48", true, 80, false, true},     // decode without norm launches but the final one
           {"dense.ak48", true, 80, false, true},          // q, k and v apart: the norms stay
           {"moe-norm.awq.moe3", true, 80, false, true},     // 48-wide KV heads: q, k, v apart, norms stay
           {"fusable-moe", true, 80, false, true},        // MoE with q|k|v concatenated: the attention side fused
           {"fusable-moe", true, 90, true, true},          // and frag experts: the routed expert GEMVs at decode
           {"dense-tied.ak48", true, 80, false, false, true, 70}}) {  // a 70-row prompt on the fp16 copy
    INFO(c.file << (c.frag ? ", frag layout" : ", file layout") << ", sm_" << c.arch
                << (c.frag_experts ? ", frag experts" : "") << (c.fuse_norm ? ", fused norms" : "")
                << (c.prefill_f16 ? ", fp16 copy" : "") << ", " << c.prompt << "-row prompt");
    const std::string file = std::string(c.file) == "fusable-moe" ? qt::test::write_fusable_moe_model()
                                                                   : source_root() + "/tests/golden/files/" + c.file;
    const std::unique_ptr<ModelFile> model_file = ModelFile::open(file);
    const ModelWeights& w = model_file->weights();
    emu::EmuOptions eo;
    eo.threads = 2;
    eo.arch = c.arch;
    emu::EmuDevice device(eo);
    rt::DeviceBackendOptions o;
    o.store_prefix = "emu.";
    o.graphs = false;
    o.time_launches = true;
    o.frag_layout = c.frag;
    o.frag_experts = c.frag_experts;
    o.fuse_norm = c.fuse_norm;
    o.prefill_f16 = c.prefill_f16;
    rt::DeviceBackend backend(device, o);
    rt::Qwen3Model model(w, backend, c.prompt < 64 ? 64 : 128);
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < c.prompt; ++i) tokens.push_back(int32_t((i * 37 + 11) % w.config.vocab_size));
    int64_t before = launches(backend);
    const int32_t next = model.forward_greedy(tokens.data(), c.prompt);
    const tune::StepPrediction prefill = predict(w, c, false, c.prompt), decode = predict(w, c, true, c.prompt);
    CHECK(launches(backend) - before == prefill.default_launches);
    // The same kernels, by name: the families and points the model picks are the ones the runtime launches.
    CHECK(launched(backend) == predicted(prefill));
    before = launches(backend);
    model.forward_greedy(&next, 1);
    CHECK(launches(backend) - before == decode.default_launches);
    CHECK(launched(backend) == predicted(decode));
  }
}
