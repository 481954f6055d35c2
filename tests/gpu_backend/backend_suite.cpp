#include "tests/gpu_backend/backend_suite.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "models/core/linear_shapes.h"
#include "models/formats/model_file.h"
#include "models/synthetic/presets.h"
#include "models/synthetic/synthetic.h"
#include "runtime/cpu/cpu_backend.h"
#include "device/blas/blas_lt.h"
#include "device/blas/default_route.h"
#include "kernels_src/moe_stream/moe_stream_family.h"
#include "kernels_src/moe_wgmma/moe_wgmma_family.h"
#include "kernels_src/registry/registry.h"
#include "runtime/gpu/device_backend.h"
#include "runtime/model/qwen3_model.h"
#include "common/paths.h"

namespace qt::test {
namespace {

using namespace qt::rt;

const std::string kFiles = qt::source_root() + "/tests/golden/files/";

// The device keeps activations, the residual stream and the KV cache in fp16 (relative rounding 2^-11 per
// store); over the golden models' 2-3 layers, with logits of standard deviation about 2.5, that costs a few
// hundredths (measured worst 0.0154 on the golden files). kLogitTolerance bounds |device - CPU reference| per logit; the measured worst case is printed.
constexpr float kLogitTolerance = 0.04f;

struct Fixture {
  std::unique_ptr<ModelFile> file;
  std::unique_ptr<dev::Device> device;
  std::unique_ptr<DeviceBackend> gpu;
  CpuBackend cpu{[] {
    CpuOptions o;
    o.reference = true;
    o.threads = 2;
    return o;
  }()};
  // `name`: a file of tests/golden/files, or an absolute path.
  Fixture(const DeviceFactory& make, const std::string& name, bool trtllm = false,
          const std::function<void(dev::Device&, DeviceBackendOptions&)>& configure = {})
      : file(ModelFile::open(name.starts_with("/") ? name : kFiles + name)), device(make()) {
    DeviceBackendOptions opts;
    opts.store_prefix = "emu.";
    opts.trtllm_int8 = trtllm;
    if (configure) configure(*device, opts);
    gpu = std::make_unique<DeviceBackend>(*device, opts);
  }
  const ModelWeights& w() const { return file->weights(); }
};

std::vector<int32_t> prompt(int64_t n, int64_t vocab, int32_t salt) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + salt * 11 + (i % 3 == 0 ? vocab - 1 : 0)) % vocab));
  return t;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    d = std::max(d, std::fabs(a[i] - b[i]));
  }
  return d;
}

std::vector<int32_t> greedy(Qwen3Model& m, const std::vector<int32_t>& p, int steps) {
  std::vector<int32_t> out;
  int32_t next = m.forward_greedy(p.data(), int64_t(p.size()));
  for (int i = 0; i < steps; ++i) {
    out.push_back(next);
    if (i + 1 < steps) next = m.forward_greedy(&next, 1);
  }
  return out;
}

}  // namespace

void check_golden_logits(const DeviceFactory& make, const std::string& name, bool trtllm) {
  Fixture f(make, name, trtllm);
  const auto tokens = prompt(13, f.w().config.vocab_size, 1);
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64);
  const float d = max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll));
  WARN(name << ": max |device - CPU reference| over 13 positions = " << d);
  CHECK(d <= kLogitTolerance);
}

void check_frag_experts(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name, false, [](dev::Device&, DeviceBackendOptions& o) { o.frag_experts = true; });
  const auto tokens = prompt(13, f.w().config.vocab_size, 1);
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64);
  const float d = max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll));
  WARN(name << " with frag-layout experts: max |device - CPU reference| over 13 positions = " << d);
  CHECK(d <= kLogitTolerance);
  // Every grouped GEMM the prompt ran was a Hopper frag family, and there were some.
  size_t grouped = 0;
  for (const std::string& line : f.gpu->chooser().details()) {
    if (line.rfind("moe_gate_up", 0) != 0 && line.rfind("moe_down", 0) != 0) continue;
    ++grouped;
    INFO(line);
    CHECK(line.find(".frag|") != std::string::npos);
    CHECK(line.find("-> moe_") != std::string::npos);
    CHECK(line.find(".frag.") != std::string::npos);
  }
  CHECK(grouped >= 2);
}

void check_predequantized(const DeviceFactory& make, const std::string& name, bool blas) {
  Fixture quantized(make, name);
  Fixture f(make, name, false, [&](dev::Device& d, DeviceBackendOptions& o) {
    o.predequantize = true;
    if (blas) o.blas = std::make_shared<blas::BlasLt>(d);
  });
  const auto tokens = prompt(13, f.w().config.vocab_size, 1);
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64), q(quantized.w(), *quantized.gpu, 64);
  const float d = max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll));
  WARN(name << " predequantized: max |device - CPU reference| over 13 positions = " << d);
  CHECK(d <= kLogitTolerance);
  q.forward(tokens, LogitsRows::kLast);
  // The dense weights now live on the device as fp16 only: more bytes than the quantized upload, no copy of both.
  const uint64_t fp16_bytes = f.gpu->weight_bytes(), quantized_bytes = quantized.gpu->weight_bytes();
  CHECK(fp16_bytes > quantized_bytes);
  const auto& counts = f.gpu->blas_counts();
  if (blas) {
    // The 13-row prompt's linears (M > 8) go to cuBLASLt without a tuned table; decode rows to the fp16 GEMV.
    CHECK(counts.blas > 0);
    const auto want = greedy(ref, tokens, 8), got = greedy(dev, tokens, 8);
    CHECK(got == want);
    CHECK(counts.families > 0);
  } else {
    CHECK(counts.blas == 0);
  }
}

void check_baseline_dispatch(const DeviceFactory& make, const std::string& name, const std::string& baseline,
                             const BaselineStore& store) {
  const blas::Baseline* row = blas::find_baseline(baseline);
  REQUIRE(row);
  REQUIRE(row->dequant_family);
  const kernels::KernelFamily& problem = kernels::find_family(row->problem_family);
  Fixture f(make, name, false, [&](dev::Device& d, DeviceBackendOptions& o) {
    const auto file = ModelFile::open(kFiles + name);
    o.blas = std::make_shared<blas::BlasLt>(d);
    // The weights in the layout the baseline's dispatch (its problem family's op) is kept for.
    o.frag_layout = kernels::op_weight_layout(problem.op) == "frag";
    o.store_prefix = "cuda.";  // cuBLASLt runs on a CUDA GPU only
    o.tuned = store(d, o.store_prefix, *row, problem.model_shapes(file->config(), &file->weights()));
  });
  const auto tokens = prompt(13, f.w().config.vocab_size, 3);
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64);
  const float d = max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll));
  WARN(name << " through " << row->store_name << ": max |device - CPU reference| over 13 positions = " << d);
  CHECK(d <= kLogitTolerance);
  CHECK(greedy(dev, tokens, 8) == greedy(ref, tokens, 8));
  CHECK(f.gpu->blas_counts().blas > 0);
  size_t chosen = 0;
  for (const std::string& line : f.gpu->chooser().details()) chosen += line.find(row->store_name) != std::string::npos;
  CHECK(chosen > 0);
}

void check_default_route(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name, false, [&](dev::Device& d, DeviceBackendOptions& o) {
    o.blas = std::make_shared<blas::BlasLt>(d);
    o.store_prefix = "cuda.";
  });
  const int64_t rows = blas::kDequantBlasRows + 6;
  const auto tokens = prompt(rows, f.w().config.vocab_size, 5);
  // The prompt and the three greedy steps below; the golden models hold 128 positions.
  const int64_t context = rows + 8;
  Qwen3Model ref(f.w(), f.cpu, context), dev(f.w(), *f.gpu, context);
  // Only the last row's logits, so the fp16 lm_head runs one row, on f16_gemv: every cuBLASLt call is a projection.
  const float d = max_diff(dev.forward(tokens, LogitsRows::kLast), ref.forward(tokens, LogitsRows::kLast));
  WARN(name << " at " << rows << " rows on dequant + cuBLASLt: max |device - CPU reference| = " << d);
  CHECK(d <= kLogitTolerance);
  // q/k/v (one call or three), o, gate/up (one or two) and down: at least four per layer.
  CHECK(f.gpu->blas_counts().blas >= 4 * int64_t(f.w().config.n_layers));
  const int64_t prompt_calls = f.gpu->blas_counts().blas;
  Qwen3Model ref_greedy(f.w(), f.cpu, context), dev_greedy(f.w(), *f.gpu, context);
  const std::vector<int32_t> want = greedy(ref_greedy, tokens, 4);
  CHECK(greedy(dev_greedy, tokens, 4) == want);
  // The same prompt's calls again, and none for the three decode steps: decode rows stay on the GEMV families.
  CHECK(f.gpu->blas_counts().blas == 2 * prompt_calls);
}

void check_weight_layouts(const DeviceFactory& make, const std::string& name) {
  for (bool frag : {true, false}) {
    Fixture f(make, name, false, [frag](dev::Device&, DeviceBackendOptions& o) { o.frag_layout = frag; });
    const auto tokens = prompt(13, f.w().config.vocab_size, 8);
    Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64);
    const float d = max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll));
    INFO(name << (frag ? " in the frag layout" : " in the file layout"));
    CHECK(d <= kLogitTolerance);
    // Which families ran the projections (the chooser's lines "op|type|shape -> family"): the frag ones
    // exactly when the frag layout was asked for.
    const std::string type = weight_type_name(f.w().layers.front().wq.type);
    const std::string lm_head = " N=" + std::to_string(f.w().config.vocab_size) + " ";
    size_t frag_choices = 0, file_choices = 0;
    for (const std::string& line : f.gpu->chooser().details()) {
      INFO(line);
      if (line.find(lm_head) != std::string::npos) continue;  // the lm_head keeps the file layout either way
      frag_choices += line.rfind("linear.frag|" + type + "|", 0) == 0 && line.find("_frag_") != std::string::npos;
      file_choices += line.rfind("linear|" + type + "|", 0) == 0;
    }
    CHECK((frag_choices > 0) == frag);
    CHECK((file_choices > 0) == !frag);
  }
}

void check_greedy_tokens(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name);
  const auto tokens = prompt(5, f.w().config.vocab_size, 2);
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64);
  const auto want = greedy(ref, tokens, 16), got = greedy(dev, tokens, 16);
  CHECK(got == want);
  // Decode steps after the first two repeat one launch sequence: they are replayed from a captured graph.
  CHECK(f.gpu->launch_stats().captures >= 1);
  CHECK(f.gpu->launch_stats().replays >= 10);
}

namespace {

int64_t launches(const DeviceBackend& d) { return d.launch_stats().launches + d.launch_stats().replayed_launches; }

// One more decode step of `next` on the device and on the CPU reference: its logits within the tolerance.
void check_decode_step_logits(Qwen3Model& dev, Qwen3Model& ref, int32_t next, const std::string& what) {
  const float d = max_diff(dev.forward(&next, 1, LogitsRows::kLast), ref.forward(&next, 1, LogitsRows::kLast));
  WARN(what << ": max |device - CPU reference| of a decode step's logits = " << d);
  CHECK(d <= kLogitTolerance);
}

// Two device configurations (`on`, `off`) and the CPU reference greedily decoding `steps` tokens after one 5-token
// prompt: both give the reference's tokens. The models stay for the checks of what each launched.
struct GreedyPair {
  Qwen3Model ref, on, off;
  std::vector<int32_t> want;
  GreedyPair(Fixture& a, Fixture& b, int32_t salt, int steps)
      : ref(a.w(), a.cpu, 64), on(a.w(), *a.gpu, 64), off(b.w(), *b.gpu, 64) {
    const auto tokens = prompt(5, a.w().config.vocab_size, salt);
    want = greedy(ref, tokens, steps);
    CHECK(greedy(on, tokens, steps) == want);
    CHECK(greedy(off, tokens, steps) == want);
  }
};

bool lists_concatenated_qkv(const ModelWeights& w) {
  for (const LinearShape& s : model_linear_shapes(w.config, &w))
    if (s.label == "wq|wk|wv") return s.n == w.config.q_dim() + 2 * w.config.kv_dim() && s.max_rows == 1;
  return false;
}

}  // namespace

void check_concatenated_qkv(const DeviceFactory& make, const std::string& name, bool concatenated,
                            DeviceWeights::Storage storage) {
  auto stored = [storage](DeviceBackendOptions& o) {
    o.predequantize = storage == DeviceWeights::Storage::kF16;
    o.frag_layout = storage == DeviceWeights::Storage::kFrag;
  };
  Fixture on(make, name, false, [&](dev::Device&, DeviceBackendOptions& o) { stored(o); });
  Fixture off(make, name, false, [&](dev::Device&, DeviceBackendOptions& o) {
    stored(o);
    o.concatenate_qkv = false;
  });
  // The tuner's shape list names the concatenation wherever the model allows it, stored so or not.
  CHECK(lists_concatenated_qkv(on.w()));
  constexpr int kSteps = 8;
  GreedyPair run(on, off, 3, kSteps);
  // The 5-row prompt runs the three projections one by one (their outputs' rows interleave in a concatenated
  // output); each decode step runs them as one linear, where the storage allows.
  const int64_t layers = on.w().config.n_layers, decode_steps = kSteps - 1;
  const auto& g = on.gpu->group_counts();
  CHECK(g.concatenated == (concatenated ? layers * decode_steps : 0));
  CHECK(g.separate == layers * (concatenated ? 1 : 1 + decode_steps));
  CHECK(off.gpu->group_counts().concatenated == 0);
  CHECK(launches(*off.gpu) - launches(*on.gpu) == (concatenated ? 2 * layers * decode_steps : 0));
  // The parts are views of the concatenation, never a second copy.
  CHECK(on.gpu->weight_bytes() <= off.gpu->weight_bytes());
  check_decode_step_logits(run.on, run.ref, run.want.back(),
                           name + (concatenated ? " (q, k, v concatenated)" : " (q, k, v apart)"));
}

void check_concatenated_gate_up(const DeviceFactory& make, const std::string& name, bool fused) {
  Fixture on(make, name);
  Fixture off(make, name, false, [](dev::Device&, DeviceBackendOptions& o) { o.concatenate_gate_up = false; });
  constexpr int kSteps = 6;
  GreedyPair run(on, off, 5, kSteps);
  // The 5-row prompt and every decode step run gate, up and SwiGLU as one launch per layer (M <= 16) where the
  // frag layout holds [w1; w3]; apart, each is two linears and a SwiGLU launch.
  const int64_t layers = on.w().config.n_layers;
  CHECK(on.gpu->group_counts().gate_up_fused == (fused ? layers * kSteps : 0));
  CHECK(off.gpu->group_counts().gate_up_fused == 0);
  CHECK(launches(*off.gpu) - launches(*on.gpu) == (fused ? 2 * layers * kSteps : 0));
  CHECK(on.gpu->weight_bytes() <= off.gpu->weight_bytes());  // the parts are views of the concatenation
  check_decode_step_logits(run.on, run.ref, run.want.back(), name + (fused ? " (gate and up fused)" : " (gate and up apart)"));
}

std::string write_fusable_moe_model() {
  struct TempFile {  // removed when the test program exits
    std::string path;
    ~TempFile() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  };
  static const TempFile model = [] {
    WriterOptions o;
    o.format = FileFormat::MOE3;
    o.config = synthetic::preset_config("tiny-moe");
    // Heads whose q (128) and k, v (64 each) columns are whole frag tiles, so the device stores q|k|v as one.
    o.config.dim = 128, o.config.n_heads = 4, o.config.n_kv_heads = 2, o.config.head_dim = 32;
    const std::string file = (std::filesystem::temp_directory_path() /
                              ("qtune-fusable-moe-" + std::to_string(::getpid()) + ".moe3")).string();
    synthetic::write_model_file(file, o, 7);
    return TempFile{file};
  }();
  return model.path;
}

namespace {

// The launches of the plan `d` chose for `op` at the shape whose key starts with `shape_prefix` ("T=1 "), read
// back from the chooser's lines "op|type|shape -> family point (source)".
int64_t chosen_plan_launches(const DeviceBackend& d, const std::string& op, const std::string& shape_prefix) {
  for (const std::string& line : d.chooser().details()) {
    const size_t type_end = line.find('|', op.size() + 1), arrow = line.find(" -> ");
    if (line.rfind(op + "|", 0) != 0 || line.compare(type_end + 1, shape_prefix.size(), shape_prefix) != 0) continue;
    const kernels::KernelFamily& f = kernels::find_family(line.substr(arrow + 4, line.find(' ', arrow + 4) - arrow - 4));
    const size_t point_at = line.find(' ', arrow + 4) + 1;
    std::stringstream point_text(line.substr(point_at, line.find(" (", point_at) - point_at)), shape_text(line.substr(type_end + 1, arrow - type_end - 1));
    kernels::Point p;
    for (std::string kv; std::getline(point_text, kv, ',');) p[kv.substr(0, kv.find('='))] = std::stoll(kv.substr(kv.find('=') + 1));
    kernels::Shape s;
    for (std::string kv; std::getline(shape_text, kv, ' ');)
      s.names.push_back(kv.substr(0, kv.find('='))), s.values.push_back(std::stoll(kv.substr(kv.find('=') + 1)));
    return int64_t(f.plan(p, s).launches.size());
  }
  FAIL("no choice for " << op << " at " << shape_prefix);
  return 0;
}

// The launches a decode step's MoE block saves per layer when its frag-layout experts run as the two routed GEMVs
// (moe_stream) instead of `off`'s plans: the gating, every launch of the grouped gate|up and down plans and the
// finalize, less the two GEMVs.
int64_t moe_stream_saved_launches(const DeviceBackend& off) {
  return 1 + chosen_plan_launches(off, "moe_gate_up.frag", "T=1 ") + chosen_plan_launches(off, "moe_down.frag", "T=1 ") +
         1 - 2;
}

}  // namespace

void check_fused_norm(const DeviceFactory& make, const std::string& name, bool fused) {
  Fixture on(make, name, false, [](dev::Device&, DeviceBackendOptions& o) { o.fuse_norm = true; });
  Fixture off(make, name);
  constexpr int kSteps = 6;
  GreedyPair run(on, off, 6, kSteps);
  // The 5-row prompt keeps its norm launches. Each decode step's layers run none: the norms before q|k|v and
  // gate|up inside those GEMVs, the residual adds in o_proj and down_proj or the MoE finalize, and a MoE block's
  // norm in o_proj's last blocks. Every layer's attention, fused or not, takes q/k norm, RoPE and the KV write
  // into its launch.
  const bool moe = on.w().config.is_moe();
  const int64_t steps = on.w().config.n_layers * (kSteps - 1);
  const auto& g = on.gpu->group_counts();
  CHECK(g.norm_fused == (fused ? (moe ? 1 : 2) * steps : 0));
  CHECK(g.residual_fused == (fused ? (moe ? 1 : 2) * steps : 0));
  CHECK(g.moe_residual == (fused && moe ? steps : 0));
  CHECK(g.residual_norm == (fused && moe ? steps : 0));
  CHECK(g.rope_fused == steps);
  const auto& plain = off.gpu->group_counts();
  CHECK(plain.norm_fused + plain.residual_fused + plain.rope_fused + plain.moe_residual == 0);
  // Experts in the frag layout (sm_90's default): a fused decode step also runs the MoE block as the two routed
  // GEMVs of check_moe_stream, so its gating, grouped plans and finalize go too, the finalize's residual add
  // into the down GEMV. Whether they are is read from the unfused run's choices, not from the counter checked.
  bool frag_experts = false;
  for (const std::string& line : off.gpu->chooser().details()) frag_experts |= line.rfind("moe_gate_up.frag|", 0) == 0;
  if (moe) CHECK(frag_experts == kernels::moe_wgmma::frag_experts_by_default(on.device->arch()));
  const bool stream = fused && moe && frag_experts;
  CHECK(g.moe_stream == (stream ? steps : 0));
  const int64_t moe_saved = stream ? moe_stream_saved_launches(*off.gpu) : 0;
  CHECK(launches(*off.gpu) - launches(*on.gpu) == ((fused ? 3 : 1) + moe_saved) * steps);
  // Each fused op chosen on its own family (o_proj and down_proj may share a shape).
  const std::vector<std::string> ops =
      !moe     ? std::vector<std::string>{"rmsnorm_linear.frag|", "rmsnorm_gate_up_swiglu.frag|", "linear_residual.frag|"}
      : stream ? std::vector<std::string>{"rmsnorm_linear.frag|", "linear_residual_rmsnorm.frag|",
                                          std::string(kernels::moe_stream::kDownResidualOp) + "|"}
               : std::vector<std::string>{"rmsnorm_linear.frag|", "linear_residual_rmsnorm.frag|", "moe_finalize_residual|"};
  for (const std::string& op : ops) {
    size_t chosen = 0;
    for (const std::string& line : on.gpu->chooser().details()) {
      if (line.rfind(op, 0) != 0) continue;
      INFO(line);
      ++chosen;
      // The family chosen (after " -> "), not the op, which names a norm or residual itself.
      const std::string family = line.substr(line.find(" -> ") + 4);
      CHECK((family.find("_norm_") != std::string::npos || family.find("_residual") != std::string::npos));
    }
    CHECK((chosen > 0) == fused);
  }
  check_decode_step_logits(run.on, run.ref, run.want.back(), name + (fused ? " (norms fused)" : " (norms not fusable)"));
}

void check_moe_stream(const DeviceFactory& make, const std::string& name) {
  Fixture on(make, name, false, [](dev::Device&, DeviceBackendOptions& o) { o.frag_experts = true, o.fuse_norm = true; });
  Fixture off(make, name, false, [](dev::Device&, DeviceBackendOptions& o) { o.frag_experts = true; });
  constexpr int kSteps = 6;
  GreedyPair run(on, off, 9, kSteps);
  const int64_t steps = on.w().config.n_layers * (kSteps - 1);
  CHECK(on.gpu->group_counts().moe_stream == steps);
  CHECK(off.gpu->group_counts().moe_stream == 0);
  // Per layer and step: the norm and RoPE launches (check_fused_norm), and of the MoE block the gating, every
  // launch of the grouped plans and the finalize but the two GEMVs.
  CHECK(launches(*off.gpu) - launches(*on.gpu) == (3 + moe_stream_saved_launches(*off.gpu)) * steps);
  for (const std::string& line : on.gpu->chooser().details()) {
    INFO(line);
    CHECK(line.rfind("moe_finalize_residual", 0) != 0);  // decode's finalize is the down GEMV's own
    CHECK(line.rfind("moe_gating|-|M=1 ", 0) != 0);       // and its gating each expert GEMV's block's
  }
  check_decode_step_logits(run.on, run.ref, run.want.back(), name + " (routed expert GEMVs)");
}

void check_qkv_types_differ(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name);
  ModelWeights w = f.w();
  std::vector<std::vector<float>> k_values;
  k_values.reserve(w.layers.size());
  for (LayerWeights& l : w.layers) {
    k_values.push_back(dequantize(l.wk));
    QTensor k;
    k.type = WeightType::F32, k.rows = l.wk.rows, k.cols = l.wk.cols, k.data = k_values.back().data();
    l.wk = k;
  }
  REQUIRE(lists_concatenated_qkv(f.w()));
  CHECK(!lists_concatenated_qkv(w));
  const auto tokens = prompt(5, w.config.vocab_size, 4);
  constexpr int kSteps = 6;
  Qwen3Model ref(w, f.cpu, 64), dev(w, *f.gpu, 64);
  CHECK(greedy(dev, tokens, kSteps) == greedy(ref, tokens, kSteps));
  CHECK(f.gpu->group_counts().concatenated == 0);
  CHECK(f.gpu->group_counts().separate == w.config.n_layers * kSteps);
}

void check_prompt_logits_one_step(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name);
  const auto tokens = prompt(24, f.w().config.vocab_size, 7);
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64, 64);
  CHECK(max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll)) <= kLogitTolerance);
}

void check_multi_turn(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name);
  const int64_t V = f.w().config.vocab_size;
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64);
  // Turn one, a few decoded tokens, then turn two on the same cache: positions continue from the cache.
  const auto t1 = prompt(6, V, 3), t2 = prompt(4, V, 4);
  const auto a = greedy(ref, t1, 3), b = greedy(dev, t1, 3);
  CHECK(a == b);
  std::vector<int32_t> second(b.begin() + 2, b.end());  // the last sampled token was never fed back
  second.insert(second.end(), t2.begin(), t2.end());
  REQUIRE(ref.position() == dev.position());
  const float d = max_diff(dev.forward(second, LogitsRows::kAll), ref.forward(second, LogitsRows::kAll));
  CHECK(d <= kLogitTolerance);
  CHECK(dev.position() == 6 + 2 + int64_t(second.size()));
}

void check_long_prompt(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name);
  const auto tokens = prompt(24, f.w().config.vocab_size, 5);
  // Prefill chunks of 8 rows: a 24-token prompt takes three, each attending to the ones before.
  Qwen3Model ref(f.w(), f.cpu, 64), dev(f.w(), *f.gpu, 64, 8);
  const float d = max_diff(dev.forward(tokens, LogitsRows::kAll), ref.forward(tokens, LogitsRows::kAll));
  CHECK(d <= kLogitTolerance);
}

void check_full_context(const DeviceFactory& make, const std::string& name) {
  Fixture f(make, name);
  const int64_t C = 20;
  const auto tokens = prompt(C - 4, f.w().config.vocab_size, 6);
  Qwen3Model ref(f.w(), f.cpu, C), dev(f.w(), *f.gpu, C);
  const auto a = greedy(ref, tokens, 4), b = greedy(dev, tokens, 4);  // fills the cache to C - 1 ...
  CHECK(a == b);
  const int32_t last = b.back();
  const float d = max_diff(dev.forward(&last, 1, LogitsRows::kLast), ref.forward(&last, 1, LogitsRows::kLast));
  CHECK(d <= kLogitTolerance);  // ... and the last row
  CHECK(dev.position() == C);
  CHECK_THROWS_AS(dev.forward(&last, 1, LogitsRows::kLast), Error);  // a full cache refuses more
}

void check_moe_transformers_goldens(const DeviceFactory& make, bool trtllm) {
  std::ifstream in(qt::source_root() + "/tests/golden/manifest.json");
  REQUIRE(in.good());
  const nlohmann::json m = nlohmann::json::parse(in);
  int files = 0;
  for (const auto& file : m["files"]) {
    const std::string model = file["model"].get<std::string>();
    if (model.rfind("moe", 0) != 0) continue;
    const std::string name = file["file"].get<std::string>();
    INFO(name);
    Fixture f(make, name.substr(name.rfind('/') + 1), trtllm);
    const auto& entry = m["models"][model];
    const auto& scheme = entry["schemes"][file["scheme"].get<std::string>()];
    float worst = 0;
    for (size_t i = 0; i < entry["sequences"].size(); ++i) {
      const std::vector<int32_t> tokens = entry["sequences"][i].get<std::vector<int32_t>>();
      const auto& lg = scheme["logits"][i];
      const int64_t T = lg["shape"][0], V = lg["shape"][1];
      std::ifstream lf(qt::source_root() + "/tests/golden/" + lg["file"].get<std::string>(), std::ios::binary);
      std::vector<float> want(size_t(T * V));
      lf.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
      REQUIRE(lf.gcount() == std::streamsize(want.size() * 4));
      Qwen3Model dev(f.w(), *f.gpu, 64);
      const std::vector<float> got = dev.forward(tokens, LogitsRows::kAll);
      worst = std::max(worst, max_diff(got, want));
      for (int64_t t = 0; t < T; ++t) {
        const float* g = got.data() + t * V;
        CHECK((std::max_element(g, g + V) - g) == lg["top1"][size_t(t)].get<int64_t>());
      }
    }
    WARN(name << ": max |device - transformers| = " << worst);
    CHECK(worst <= kLogitTolerance);
    ++files;
  }
  CHECK(files >= 5);
}

}  // namespace qt::test
