#include "runtime/gpu/device_backend.h"

#include <algorithm>
#include <array>
#include <set>

#include "common/error.h"
#include "common/half.h"
#include "device/blas/default_route.h"
#include "kernels_src/attention/attention_family.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/moe_wgmma/moe_wgmma_family.h"
#include "kernels_src/registry/registry.h"
#include "models/core/linear_shapes.h"
#include "runtime/gpu/device_act.h"

namespace qt::rt {
namespace {

class ActBuffer final : public DeviceBuffer {
 public:
  ActBuffer(dev::Device& d, size_t elements) : buf_(d, std::max<size_t>(elements, 1) * 2), n_(elements) {}
  Act view() override { return Act{buf_.ptr().addr, ActType::F16}; }
  size_t size() const override { return n_; }

 private:
  dev::Buffer buf_;
  size_t n_;
};

using blas::kDecodeGemvRows;

// Where a linear layer runs when cuBLASLt is at hand (every GPU run where the library loads):
//   measured: the tuning store's dispatch for the shape ranks a cuBLASLt baseline of device/blas's table
//             ("cuda.cublaslt_f16", or a quantized type's dequant + cuBLASLt such as
//             "cuda.q8_0_dequant_cublaslt") first in the batch's bucket -> cuBLASLt (kernel_choice.h's
//             external choice, at the heuristic candidate the tuner found fastest);
//   default:  with no dispatch, blas::default_route (device/blas/default_route.h, measured on an H200): fp16
//             weights above one row and frag-layout quantized weights from 64 rows go to cuBLASLt (the
//             quantized ones through their dequant family); the rest to our kernel families.

// The layout a dense weight is held in on the device: the frag arrays replace the file's (device_weights.h).
const char* held_layout(const DeviceTensor& w) { return w.arrays.count("bq") ? "frag" : "file"; }

}  // namespace

const blas::Baseline* store_baseline(std::string_view store_name, std::string_view store_prefix) {
  if (!store_name.starts_with(store_prefix)) return nullptr;
  return blas::find_baseline(store_name.substr(store_prefix.size()));
}

void accept_store_baselines(KernelChooser& chooser, const std::string& store_prefix) {
  chooser.accept_external(
      [store_prefix](const std::string& name) { return store_baseline(name, store_prefix) != nullptr; });
}

std::string baseline_refusal(const blas::Baseline& baseline, const DeviceTensor& w) {
  const std::string name = baseline.store_name;
  if (w.type != baseline.weight_type)
    return name + " multiplies " + weight_type_name(baseline.weight_type) + " weights, not " + weight_type_name(w.type);
  const std::string reads = kernels::op_weight_layout(kernels::find_family(baseline.problem_family).op);
  if (reads != held_layout(w))
    return name + " reads weights in the " + reads + " layout, and this one is held in the " + held_layout(w) + " layout";
  return "";
}

DeviceBackend::DeviceBackend(dev::Device& device, DeviceBackendOptions options)
    : device_(device), options_(std::move(options)),
      chooser_(options_.tuned, device.store_fingerprint(), options_.store_prefix, device.arch()),
      queue_(device, options_.graphs), launcher_(device, queue_), weights_(device) {
  pos_ = dev::Buffer(device_, 4);
  queue_.time_launches(options_.time_launches);
  queue_.on_launch([this](size_t run, size_t queued) {
    if (!step_progress_) return;
    step_progress_->set_total(double(queued));
    step_progress_->update(double(run));
  });
  if (options_.blas) accept_store_baselines(chooser_, options_.store_prefix);
}

DeviceBackend::~DeviceBackend() = default;

std::string DeviceBackend::name() const { return "device (" + device_.name() + ", fp16 activations)"; }

// "emu: loading weights": the device kind (the store prefix without its dot) and what runs.
std::string DeviceBackend::progress_label(const std::string& what) const {
  const std::string kind = options_.store_prefix.empty() ? "device" : options_.store_prefix.substr(0, options_.store_prefix.size() - 1);
  return kind + ": " + what;
}

// Every weight prepare() places on the device, with how it is stored; `layer_done` after each layer's.
void DeviceBackend::visit_weights(const ModelWeights& w, const WeightVisitor& v) const {
  using Storage = DeviceWeights::Storage;
  const Storage dense = options_.predequantize ? Storage::kF16
                        : !options_.frag_layout  ? Storage::kFile
                        : options_.prefill_f16   ? Storage::kFragF16
                                                 : Storage::kFrag;
  // The lm_head and the router keep the file layout (kernels::default_weight_layout tells the tuner so).
  const Storage other = options_.predequantize ? Storage::kF16 : Storage::kFile;
  v.tensor(w.embedding, Storage::kFile);
  v.tensor(w.classifier, other);
  v.vector(w.final_norm);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::array<const QTensor*, 3> qkv{&l.wq, &l.wk, &l.wv};
    const bool concatenated =
        options_.concatenate_qkv && qkv_concatenable(l.wq, l.wk, l.wv) && v.concatenation(qkv, dense);
    if (!concatenated)
      for (const QTensor* t : qkv) v.tensor(*t, dense);
    const std::array<const QTensor*, 2> gate_up{&l.w1, &l.w3};
    // Only in the frag layout: the fused GEMV reads it, and the file-layout fused families read the parts.
    const bool mlp_concatenated = options_.concatenate_gate_up && (dense == Storage::kFrag || dense == Storage::kFragF16) &&
                                  gate_up_concatenable(l.w1, l.w3) && v.concatenation(gate_up, dense);
    for (const QTensor* t : {&l.wo, &l.w2}) v.tensor(*t, dense);
    if (!mlp_concatenated)
      for (const QTensor* t : gate_up) v.tensor(*t, dense);
    v.tensor(l.router, other);
    for (const ExpertStack* s : {&l.expert_w1, &l.expert_w2, &l.expert_w3}) v.stack(*s);
    for (const std::vector<float>* n : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm}) v.vector(*n);
    if (v.layer_done) v.layer_done(i + 1);
  }
}

int64_t DeviceBackend::prefill_chunk() const { return blas::prefill_chunk(options_.blas != nullptr); }

void DeviceBackend::prepare(const ModelWeights& w) {
  if (options_.frag_experts.value_or(false) && options_.trtllm_int8)
    throw Error("device backend: MoE experts go to the frag layout or TensorRT-LLM's, not both", kExitBadInput);
  if (options_.frag_experts.value_or(false) && w.config.is_moe() && device_.arch() != 90)
    throw Error("device backend: frag-layout MoE experts run on wgmma, sm_90a; this device is sm_" +
                    std::to_string(device_.arch()) + " (keep the file layout, or --emu-arch sm90 on the emulator)",
                kExitUnavailable);
  const bool frag_experts =
      options_.frag_experts.value_or(kernels::moe_wgmma::frag_experts_by_default(device_.arch(), options_.trtllm_int8));
  const DeviceWeights::Storage experts = frag_experts ? DeviceWeights::Storage::kFrag : DeviceWeights::Storage::kFile;
  // What the model will hold, checked before anything is uploaded: a model the device cannot hold is refused
  // at once, stating what it needs, instead of failing (or being killed) minutes into the upload.
  uint64_t resident = 0, largest = 0;
  std::set<const void*> counted;  // a tied classifier is the embedding's tensor
  auto need = [&](const void* data, uint64_t bytes) {
    if (!counted.insert(data).second) return;
    resident += bytes;
    largest = std::max(largest, bytes);
  };
  visit_weights(w, {[&](const QTensor& t, DeviceWeights::Storage s) { need(t.data, DeviceWeights::bytes_for(t, s)); },
                    [&](std::span<const QTensor* const> parts, DeviceWeights::Storage s) {
                      const uint64_t bytes = DeviceWeights::concatenated_bytes(parts, s);
                      if (bytes) need(parts.front()->data, bytes);
                      return bytes > 0;
                    },
                    [&](const ExpertStack& s) { need(s.base.data, DeviceWeights::stack_bytes(s, experts)); },
                    [&](const std::vector<float>& n) { need(n.data(), n.size() * 4); }, {}});
  device_.check_capacity(resident, largest);

  Progress progress(progress_label("loading weights"), double(w.layers.size()), "layers", false,
                    options_.progress_after_seconds);
  visit_weights(w, {[&](const QTensor& t, DeviceWeights::Storage s) { weights_.add(t, s); },
                    [&](std::span<const QTensor* const> parts, DeviceWeights::Storage s) {
                      return weights_.add_concatenated(parts, s);
                    },
                    [&](const ExpertStack& s) { weights_.add_stack(s, options_.trtllm_int8, experts); },
                    [&](const std::vector<float>& n) { weights_.add_vector(n); },
                    [&](size_t layers) { progress.update(double(layers)); }});
  weights_.finish_loading();
  progress.finish();
}

std::unique_ptr<DeviceBuffer> DeviceBackend::alloc(size_t elements) {
  return std::make_unique<ActBuffer>(device_, elements);
}

void DeviceBackend::upload(const float* host, size_t n, Act dst) {
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = float_to_half_bits(host[i]);
  queue_.flush();
  device_.copy_to_device(dp(dst), h.data(), n * 2);
}

void DeviceBackend::download(Act src, size_t n, float* host) {
  if (in_step_) {
    if (!step_replayable_) {
      // A prefill step reuses the logits buffer every 16 rows, so its downloads happen where they are asked
      // for; a decode step (one row, the only kind replayed from a graph) keeps them for end_step.
      queue_.flush();
      std::vector<uint16_t> h(n);
      device_.copy_to_host(h.data(), dp(src), n * 2);
      for (size_t i = 0; i < n; ++i) host[i] = half_bits_to_float(h[i]);
      return;
    }
    downloads_.push_back({src, n, host});
    return;
  }
  std::vector<uint16_t> h(n);
  device_.copy_to_host(h.data(), dp(src), n * 2);
  for (size_t i = 0; i < n; ++i) host[i] = half_bits_to_float(h[i]);
}

// A queued launch may still name an outgrown buffer, so it lives until the backend does.
void DeviceBackend::grow(dev::Buffer& b, size_t need, size_t bytes) {
  if (b.bytes() >= need) return;
  if (b.bytes()) retired_.push_back(std::move(b));
  b = dev::Buffer(device_, bytes);
}

dev::DevPtr DeviceBackend::scratch(size_t bytes) {
  grow(scratch_, bytes, bytes);
  return scratch_.ptr();
}

void DeviceBackend::stage_tokens(const int32_t* tokens, int64_t m) {
  grow(tokens_, size_t(m) * 4, size_t(std::max<int64_t>(m, 16)) * 4);
  queue_.flush();
  device_.copy_to_device(tokens_.ptr(), tokens, size_t(m) * 4);
  staged_tokens_ = tokens;
}

void DeviceBackend::begin_step(const int32_t* tokens, int64_t m, int64_t pos0) {
  stage_tokens(tokens, m);
  const int32_t p = int32_t(pos0);
  device_.copy_to_device(pos_.ptr(), &p, 4);
  step_pos0_ = pos0;
  in_step_ = true;
  // The kernels a step has queued are known only as it goes: the total grows with them.
  step_progress_.emplace(progress_label("forward of " + std::to_string(m) + " token" + (m == 1 ? "" : "s")), 0,
                         "kernels", false, options_.progress_after_seconds);
  step_replayable_ = m == 1;
  queue_.begin_step(m == 1, m);
}

void DeviceBackend::end_step() {
  queue_.end_step();
  if (step_progress_) step_progress_->finish();
  step_progress_.reset();
  in_step_ = false;
  for (const PendingDownload& d : downloads_) download(d.src, d.n, d.host);
  downloads_.clear();
  for (const PendingTokens& t : token_outputs_) device_.copy_to_host(t.host, argmax_.ptr(), size_t(t.m) * 4);
  token_outputs_.clear();
  staged_tokens_ = nullptr;
}

// Kernels read the position from device memory, written by begin_step: an op at any other position would
// silently compute at the wrong one.
void DeviceBackend::check_step_position(const char* op, int64_t pos0) const {
  if (!in_step_ || pos0 != step_pos0_)
    throw Error(std::string("device backend: ") + op + " at position " + std::to_string(pos0) +
                    " outside a step begun at that position (positions are read from device memory)",
                kExitFailure);
}

void DeviceBackend::run(const std::string& op, const WeightType* type, const kernels::Shape& shape, const Bindings& b) {
  launcher_.run(chooser_.choose(op, type, shape), shape, b);
}

void DeviceBackend::embed(const QTensor& table, const int32_t* tokens, int64_t m, Act out) {
  for (int64_t i = 0; i < m; ++i)
    if (tokens[i] < 0 || tokens[i] >= table.rows)
      throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                  std::to_string(table.rows) + ")");
  if (staged_tokens_ != tokens) stage_tokens(tokens, m);
  const DeviceTensor& t = weights_.tensor(table);
  Bindings b;
  b.buf("tokens", tokens_.ptr(), m * 4).buf("y", dp(out), h16(m * t.cols));
  for (const auto& [name, a] : t.arrays) b.buf(name, a.ptr, a.bytes);
  // Quantized tables' scale arrays are sized by their group, so those families take it as a dimension.
  const kernels::Shape shape = weight_traits(t.type).quantized
                                   ? kernels::Shape{{"M", "N", "V", "G"}, {m, t.cols, t.rows, t.group}, "embedding"}
                                   : kernels::Shape{{"M", "N", "V"}, {m, t.cols, t.rows}, "embedding"};
  run("embedding", &t.type, shape, b);
}

// y = x W^T on cuBLASLt, queued in order with the step's launches (and recorded into its graph).
void DeviceBackend::queue_blas(dev::DevPtr w, blas::WeightLayout layout, Act x, int64_t m, int64_t n, int64_t k, Act y,
                               int rank) {
  ++blas_counts_.blas;
  blas::BlasLt& lt = *options_.blas;
  lt.prepare(layout, m, n, k);  // the heuristic is asked here, never during a capture
  const std::string sig = "cublaslt " + std::to_string(w.addr) + " " + std::to_string(int(layout)) + " " +
                          std::to_string(x.addr) + " " + std::to_string(y.addr) + " " + std::to_string(m) + "x" +
                          std::to_string(n) + "x" + std::to_string(k) + " r" + std::to_string(rank);
  const dev::DevPtr xp = dp(x), yp = dp(y);
  queue_.call([&lt, w, layout, xp, yp, m, n, k, rank] { lt.gemm_f16(w, layout, xp, yp, m, n, k, rank); }, sig,
              "cuBLASLt " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
}

// The heuristic candidate the tuner measured fastest for this external contender and shape (0 if none).
int DeviceBackend::blas_rank(const std::string& store_name, const std::string& dtypes, const kernels::Shape& shape) const {
  if (!options_.tuned) return 0;
  const auto w = options_.tuned->lookup(chooser_.fingerprint(), store_name, dtypes, shape.values, "");
  return w && w->exact ? int(w->point.value("rank", 0)) : 0;
}

// A contender of the stored dispatch that is no kernel family: cuBLASLt on fp16 weights, or on the weights
// dequantized to fp16 by the baseline's dequant family.
void DeviceBackend::linear_external(const KernelChoice& c, const DeviceTensor& w, Act x, int64_t m, Act y,
                                    const kernels::Shape& shape) {
  const blas::Baseline* row = store_baseline(c.external, options_.store_prefix);
  if (!row)
    throw Error("device backend: the dispatch names '" + c.external + "', which this backend does not run", kExitFailure);
  // The dispatch is keyed by weight type and layout, so only a store written by hand gets here with another.
  const std::string refusal = baseline_refusal(*row, w);
  if (!refusal.empty()) throw Error("device backend: the dispatch names '" + c.external + "', but " + refusal, kExitFailure);
  linear_baseline(*row, blas_rank(c.external, kernels::find_family(row->problem_family).dtypes, shape), w, x, m, y, shape);
}

// cuBLASLt at the heuristic's candidate `rank`, on the weights' fp16 values or on what the baseline's dequant
// family writes from their arrays, in the layout that family writes.
void DeviceBackend::linear_baseline(const blas::Baseline& row, int rank, const DeviceTensor& w, Act x, int64_t m, Act y,
                                    const kernels::Shape& shape) {
  if (!row.dequant_family)
    return queue_blas(w.arrays.at("values").ptr, row.layout, x, m, w.rows, w.cols, y, rank);
  const kernels::KernelFamily& dq = kernels::find_family(row.dequant_family);
  const size_t bytes = size_t(h16(w.rows * w.cols));
  grow(dequantized_, bytes, bytes);
  Bindings b;
  for (const auto& [name, a] : w.arrays) b.buf(name, a.ptr, a.bytes);
  b.buf("w", dequantized_.ptr(), int64_t(bytes));
  run(dq.op, &w.type, dq.shape_from(shape), b);
  queue_blas(dequantized_.ptr(), row.layout, x, m, w.rows, w.cols, y, rank);
}

void DeviceBackend::linear(const DeviceTensor& w, Act x, int64_t m, Act y) {
  // A quantized weight's fp16 copy (prefill_f16) serves the GEMMs of many rows as a predequantized weight would,
  // whatever a tuned dispatch ranked for the quantized weight: the copy was asked for, and it is the fp16 model's
  // route (cuBLASLt where at hand).
  if (w.type != WeightType::F16 && m >= blas::kF16CopyRows) {
    if (const auto copy = w.arrays.find("values"); copy != w.arrays.end()) {
      ++blas_counts_.f16_copy;
      DeviceTensor f16;
      f16.type = WeightType::F16, f16.rows = w.rows, f16.cols = w.cols, f16.group = w.cols;
      f16.arrays["values"] = copy->second;
      return linear(f16, x, m, y);
    }
  }
  const kernels::Shape shape{{"M", "N", "K", "G"}, {m, w.rows, w.cols, w.group}, "linear"};
  const bool fp16_blas = w.type == WeightType::F16 && options_.blas != nullptr;
  const bool frag = std::string_view(held_layout(w)) == "frag";
  const KernelChoice* choice = nullptr;
  try {
    choice = &chooser_.choose(frag ? "linear.frag" : "linear", &w.type, shape);
  } catch (const Error&) {
    // No fp16 family tiles this shape: cuBLASLt serves it whatever M is.
    if (fp16_blas) return queue_blas(w.arrays.at("values").ptr, blas::WeightLayout::NK, x, m, w.rows, w.cols, y, 0);
    // No GEMM tiles this shape (a tiny model's N below a tile): decode GEMVs over row blocks of 8 serve it.
    if (m <= kDecodeGemvRows) throw;
    for (int64_t r = 0; r < m; r += kDecodeGemvRows)
      linear(w, x.at(r * w.cols), std::min(kDecodeGemvRows, m - r), y.at(r * w.rows));
    return;
  }
  if (!choice->external.empty()) return linear_external(*choice, w, x, m, y, shape);
  if (!choice->dispatched) {
    switch (blas::default_route(w.type, frag, m, options_.blas != nullptr)) {
      case blas::Route::kCublasLt:
        return queue_blas(w.arrays.at("values").ptr, blas::WeightLayout::NK, x, m, w.rows, w.cols, y, 0);
      case blas::Route::kDequantCublasLt:
        if (const blas::Baseline* row = blas::baseline_for(w.type, frag ? "linear.frag" : "linear"))
          if (baseline_refusal(*row, w).empty()) return linear_baseline(*row, 0, w, x, m, y, shape);
        break;
      case blas::Route::kFamilies: break;
    }
  }
  if (w.type == WeightType::F16 && options_.predequantize) ++blas_counts_.families;
  Bindings b;
  b.buf("x", dp(x), h16(m * w.cols)).buf("y", dp(y), h16(m * w.rows));
  for (const auto& [name, a] : w.arrays) b.buf(name, a.ptr, a.bytes);
  if (frag) bind_split_locks(b, w.rows, m);
  launcher_.run(*choice, shape, b);
}

// The frag kernels' split-K counters: one per 64-column tile of `rows` and 16 rows of `m`.
void DeviceBackend::bind_split_locks(Bindings& b, int64_t rows, int64_t m) {
  bind_counters(b, (rows + 63) / 64 * ((m + 15) / 16));
}

// `count` arrival counters as "locks", zero: every kernel that counts arrivals in them (split-K, flash-decoding)
// leaves them at zero, so one buffer serves every launch of the stream.
void DeviceBackend::bind_counters(Bindings& b, int64_t count) {
  const size_t bytes = size_t(count) * 4;
  if (locks_.bytes() < bytes) {
    grow(locks_, bytes, bytes);
    queue_.flush();
    device_.memset(locks_.ptr(), 0, bytes);
  }
  b.buf("locks", locks_.ptr(), int64_t(bytes));
}

// kExact (the MoE router's fp32 activations) has no meaning here: device activations are fp16 throughout.
void DeviceBackend::matmul(const QTensor& w, Act x, int64_t m, Act y, MatmulMode) {
  if (m <= 0) return;
  linear(weights_.tensor(w), x, m, y);
}

// At one row the concatenation's output row is [y_0 | y_1 | ...]: one launch writes every job's output where
// the jobs' outputs lie in that order back to back (the model allocates q, k and v so).
const DeviceTensor* DeviceBackend::concatenated_jobs(const MatmulJob* jobs, int count, int64_t m) const {
  std::vector<const QTensor*> parts;
  bool adjacent = true;
  for (int j = 0; j < count; ++j) {
    parts.push_back(jobs[j].w);
    if (j > 0) adjacent = adjacent && jobs[j].y.addr == jobs[j - 1].y.at(jobs[j - 1].w->rows).addr;
  }
  return m <= kConcatenatedQkvMaxRows && adjacent ? weights_.concatenated(parts) : nullptr;
}

// One linear over the concatenation where concatenated_jobs finds one; otherwise one linear per job, over each
// part's view of the concatenation.
void DeviceBackend::matmul_group(const MatmulJob* jobs, int count, Act x, int64_t m) {
  if (m <= 0) return;
  const DeviceTensor* whole = concatenated_jobs(jobs, count, m);
  if (!whole) {
    ++group_counts_.separate;
    return Backend::matmul_group(jobs, count, x, m);
  }
  ++group_counts_.concatenated;
  linear(*whole, x, m, jobs[0].y);
}

void DeviceBackend::gate_up_swiglu(const QTensor& gate, const QTensor& up_w, Act x, int64_t m, Act h, Act up) {
  const DeviceTensor& g = weights_.tensor(gate);
  const DeviceTensor& u = weights_.tensor(up_w);
  const kernels::Shape fused{{"M", "N", "K", "G"}, {m, g.rows, g.cols, g.group}, "gate+up"};
  // Stored as one frag matrix [gate | up] (visit_weights): one streaming GEMV, SwiGLU in its epilogue.
  const std::array<const QTensor*, 2> parts{&gate, &up_w};
  const DeviceTensor* whole = m <= kConcatenatedGateUpMaxRows ? weights_.concatenated(parts) : nullptr;
  if (whole && whole->arrays.count("bq") && chooser_.serves("gate_up_swiglu.frag", &g.type)) {
    const KernelChoice& c = chooser_.choose("gate_up_swiglu.frag", &g.type, fused);
    Bindings b;
    b.buf("x", dp(x), h16(m * g.cols)).buf("h", dp(h), h16(m * g.rows));
    for (const auto& [name, a] : whole->arrays) b.buf(name, a.ptr, a.bytes);
    bind_split_locks(b, whole->rows, m);
    ++group_counts_.gate_up_fused;
    launcher_.run(c, fused, b);
    return;
  }
  // The fused families read the file layout.
  const bool file_layout = !g.arrays.count("bq") && !u.arrays.count("bq");
  if (m <= kDecodeGemvRows && file_layout && g.type == u.type && g.rows == u.rows && g.group == u.group &&
      chooser_.serves("gate_up_swiglu", &g.type)) {
    const KernelChoice& c = chooser_.choose("gate_up_swiglu", &g.type, fused);
    Bindings b;
    b.buf("x", dp(x), h16(m * g.cols)).buf("h", dp(h), h16(m * g.rows));
    for (const auto& [name, a] : g.arrays) b.buf("gate_" + name, a.ptr, a.bytes);
    for (const auto& [name, a] : u.arrays) b.buf("up_" + name, a.ptr, a.bytes);
    launcher_.run(c, fused, b);
    return;
  }
  const dev::DevPtr gate_out = scratch(size_t(h16(m * g.rows)));
  linear(g, x, m, Act{gate_out.addr, ActType::F16});
  linear(u, x, m, up);
  Bindings b;
  b.buf("gate", gate_out, h16(m * g.rows)).buf("up", dp(up), h16(m * g.rows)).buf("h", dp(h), h16(m * g.rows));
  run("swiglu", nullptr, kernels::Shape{{"M", "N"}, {m, g.rows}, "swiglu"}, b);
}

void DeviceBackend::add_rmsnorm(Act x, Act residual, const float* weight, int64_t rows, int64_t n, float eps, Act y) {
  const int64_t r = residual ? 1 : 0;
  const DeviceTensor::Array w = weights_.vector(weight);
  Bindings b;
  b.buf("x", dp(x), h16(rows * n)).buf("r", dp(residual), h16(r * rows * n)).buf("w", w.ptr, w.bytes);
  b.buf("y", dp(y), h16(rows * n)).scalar("eps", eps);
  run("rmsnorm", nullptr, kernels::Shape{{"M", "N", "R"}, {rows, n, r}, "rmsnorm"}, b);
}

// The fused norm's ops (frag_family.h), each run at the choice of the plain op beside it (KernelChooser::choose_fused).
using kernels::frag::kNormGateUpOp, kernels::frag::kNormLinearOp, kernels::frag::kResidualNormOp,
    kernels::frag::kResidualOp;

void DeviceBackend::set_fuse_norm(bool on) {
  if (in_step_) throw Error("device backend: the norms' fusion changes between steps, not inside one", kExitFailure);
  options_.fuse_norm = on;
  queue_.drop_graph();
}

// Every matmul of the layer on a fused family: q|k|v (and a dense layer's gate|up) concatenated (at one row), all
// in the frag layout; a MoE layer's finalize adding into the hidden state.
bool DeviceBackend::fuses_norm(const LayerWeights& l, int64_t m) const {
  if (!options_.fuse_norm || m > std::min(kConcatenatedQkvMaxRows, kConcatenatedGateUpMaxRows)) return false;
  const std::array<const QTensor*, 3> qkv{&l.wq, &l.wk, &l.wv};
  const DeviceTensor* front = weights_.concatenated(qkv);
  if (!front) return false;
  std::vector<std::pair<const DeviceTensor*, const char*>> uses = {{front, kNormLinearOp},
                                                                   {&weights_.tensor(l.wo), kResidualOp}};
  if (!l.expert_w1.empty()) {
    if (!chooser_.serves("moe_finalize_residual", nullptr)) return false;
  } else {
    const std::array<const QTensor*, 2> gate_up{&l.w1, &l.w3};
    const DeviceTensor* mlp = weights_.concatenated(gate_up);
    if (!mlp) return false;
    uses.push_back({mlp, kNormGateUpOp});
    uses.push_back({&weights_.tensor(l.w2), kResidualOp});
  }
  for (const auto& [t, op] : uses)
    if (!t->arrays.count("bq") || !chooser_.serves(op, &t->type)) return false;
  return true;
}

// One streaming GEMV of a fused op over frag weights `w`: x in, `out` as the family's output buffer, the norm's
// weights when given. Its point is the one chosen for `base_op` at the same shape where that is the same schedule.
void DeviceBackend::fused_stream(const std::string& op, const std::string& base_op, const DeviceTensor& w,
                                 const kernels::Shape& shape, Act x, const char* out_name, Act out, int64_t out_elements,
                                 const float* norm, float eps, Act yn) {
  const int64_t m = shape["M"];
  Bindings b;
  b.buf("x", dp(x), h16(m * w.cols)).buf(out_name, dp(out), h16(out_elements));
  for (const auto& [name, a] : w.arrays) b.buf(name, a.ptr, a.bytes);
  if (yn) {
    // The rows' norm: the output's RMSNorm into yn, counted past the split counters, one per 16 rows.
    b.buf("yn", dp(yn), h16(out_elements));
    bind_counters(b, (w.rows + 63) / 64 * ((m + 15) / 16) + (m + 15) / 16);
  } else {
    bind_split_locks(b, w.rows, m);
  }
  if (norm) {
    const DeviceTensor::Array nw = weights_.vector(norm);
    b.buf("nw", nw.ptr, nw.bytes).scalar("eps", eps);
  }
  launcher_.run(chooser_.choose_fused(op, base_op, &w.type, shape), shape, b);
}

void DeviceBackend::rmsnorm_matmul_group(Act x, const float* weight, float eps, const MatmulJob* jobs, int count,
                                         int64_t m, Act xn) {
  const DeviceTensor* whole = concatenated_jobs(jobs, count, m);
  if (!whole || !whole->arrays.count("bq")) return Backend::rmsnorm_matmul_group(x, weight, eps, jobs, count, m, xn);
  ++group_counts_.norm_fused;
  const kernels::Shape shape{{"M", "N", "K", "G"}, {m, whole->rows, whole->cols, whole->group}, "linear"};
  fused_stream(kNormLinearOp, "linear.frag", *whole, shape, x, "y", jobs[0].y, m * whole->rows, weight, eps);
}

void DeviceBackend::rmsnorm_gate_up_swiglu(Act x, const float* weight, float eps, const QTensor& gate, const QTensor& up_w,
                                           int64_t m, Act h, Act up, Act xn) {
  const std::array<const QTensor*, 2> parts{&gate, &up_w};
  const DeviceTensor* whole = m <= kConcatenatedGateUpMaxRows ? weights_.concatenated(parts) : nullptr;
  if (!whole || !whole->arrays.count("bq"))
    return Backend::rmsnorm_gate_up_swiglu(x, weight, eps, gate, up_w, m, h, up, xn);
  ++group_counts_.norm_fused;
  const DeviceTensor& g = weights_.tensor(gate);
  const kernels::Shape shape{{"M", "N", "K", "G"}, {m, g.rows, g.cols, g.group}, "gate+up"};
  fused_stream(kNormGateUpOp, "gate_up_swiglu.frag", *whole, shape, x, "h", h, m * g.rows, weight, eps);
}

// Only where fuses_norm() said so: the device has no add of its own (the norms' launches add).
void DeviceBackend::matmul_residual(const QTensor& w, Act a, int64_t m, Act x, Act) {
  const DeviceTensor& t = weights_.tensor(w);
  if (!t.arrays.count("bq"))
    throw Error("device backend: the residual add is fused only into frag-layout GEMVs", kExitFailure);
  ++group_counts_.residual_fused;
  const kernels::Shape shape{{"M", "N", "K", "G"}, {m, t.rows, t.cols, t.group}, "linear"};
  fused_stream(kResidualOp, "linear.frag", t, shape, a, "y", x, m * t.rows, nullptr, 0.0f);
}

// o_proj before a MoE block: the residual GEMV whose last blocks write the rows' RMSNorm, where a family serves it.
void DeviceBackend::matmul_residual_rmsnorm(const QTensor& w, Act a, int64_t m, Act x, Act y, const float* weight,
                                            float eps, Act xn) {
  const DeviceTensor& t = weights_.tensor(w);
  if (!t.arrays.count("bq") || !chooser_.serves(kResidualNormOp, &t.type))
    return Backend::matmul_residual_rmsnorm(w, a, m, x, y, weight, eps, xn);
  ++group_counts_.residual_fused;
  ++group_counts_.residual_norm;
  const kernels::Shape shape{{"M", "N", "K", "G"}, {m, t.rows, t.cols, t.group}, "linear"};
  fused_stream(kResidualNormOp, "linear.frag", t, shape, a, "y", x, m * t.rows, weight, eps, xn);
}

// The rows an op writes into the KV cache: inside it, at the step's position.
void DeviceBackend::check_cache_rows(const char* op, const QkRopeKv& s) const {
  if (s.pos0 < 0 || s.pos0 + s.m > s.capacity)
    throw Error(std::string(op) + ": positions " + std::to_string(s.pos0) + ".." + std::to_string(s.pos0 + s.m - 1) +
                " do not fit the cache of " + std::to_string(s.capacity) + " tokens");
  check_step_position(op, s.pos0);
}

void DeviceBackend::qk_norm_rope_kv(const QkRopeKv& s) {
  check_cache_rows("qk_norm_rope_kv", s);
  const int64_t qd = s.n_heads * s.head_dim, kvd = s.n_kv_heads * s.head_dim;
  const DeviceTensor::Array qn = weights_.vector(s.q_norm), kn = weights_.vector(s.k_norm);
  Bindings b;
  b.buf("q", dp(s.q), h16(s.m * qd)).buf("k", dp(s.k), h16(s.m * kvd)).buf("v", dp(s.v), h16(s.m * kvd));
  b.buf("q_norm", qn.ptr, qn.bytes).buf("k_norm", kn.ptr, kn.bytes).buf("pos", pos_.ptr(), 4);
  b.buf("q_out", dp(s.q_out), h16(s.m * qd));
  b.buf("k_cache", dp(s.k_cache), h16(s.capacity * kvd)).buf("v_cache", dp(s.v_cache), h16(s.capacity * kvd));
  b.scalar("eps", s.eps).scalar("theta", s.theta);
  run("qk_norm_rope_kv", nullptr,
      kernels::Shape{{"M", "H", "KVH", "D", "C", "P"}, {s.m, s.n_heads, s.n_kv_heads, s.head_dim, s.capacity, 0},
                     "qk_norm_rope_kv"},
      b);
}

kernels::Shape DeviceBackend::bind_attention(Bindings& b, Act q, Act k_cache, Act v_cache, int64_t capacity,
                                             int64_t pos0, int64_t m, int64_t n_heads, int64_t n_kv_heads,
                                             int64_t head_dim, Act out) {
  const int64_t qd = n_heads * head_dim, kvd = n_kv_heads * head_dim;
  b.buf("q", dp(q), h16(m * qd)).buf("k_cache", dp(k_cache), h16(capacity * kvd));
  b.buf("v_cache", dp(v_cache), h16(capacity * kvd)).buf("pos", pos_.ptr(), 4).buf("out", dp(out), h16(m * qd));
  if (m == 1) bind_counters(b, n_kv_heads);  // flash-decoding's split blocks meet in the same launch
  // Chosen by the context bucket (kernels_src/attention's choice_shape); the launch is planned on the whole cache.
  return kernels::attention::choice_shape(m, n_heads, n_kv_heads, head_dim, pos0 + m, capacity);
}

void DeviceBackend::attention(Act q, Act k_cache, Act v_cache, int64_t capacity, int64_t pos0, int64_t m,
                              int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, Act out) {
  check_step_position("attention", pos0);
  Bindings b;
  const kernels::Shape choice = bind_attention(b, q, k_cache, v_cache, capacity, pos0, m, n_heads, n_kv_heads, head_dim, out);
  kernels::Shape plan = choice;
  plan.values[4] = capacity;
  launcher_.run(chooser_.choose(m == 1 ? "attention_decode" : "attention_prefill", nullptr, choice), plan, b);
}

// With fuse_norm, a decode step's attention takes the raw q, k and v: one launch instead of two, at the point
// chosen for attention_decode where that is the same schedule.
void DeviceBackend::rope_attention(const QkRopeKv& s, Act out) {
  constexpr const char* kRopeAttentionOp = "rope_attention_decode";
  if (!options_.fuse_norm || s.m != 1 || !chooser_.serves(kRopeAttentionOp, nullptr)) return Backend::rope_attention(s, out);
  check_cache_rows("rope_attention", s);
  const int64_t kvd = s.n_kv_heads * s.head_dim;
  Bindings b;
  const kernels::Shape choice = bind_attention(b, s.q, s.k_cache, s.v_cache, s.capacity, s.pos0, s.m, s.n_heads,
                                               s.n_kv_heads, s.head_dim, out);
  const DeviceTensor::Array qn = weights_.vector(s.q_norm), kn = weights_.vector(s.k_norm);
  b.buf("k", dp(s.k), h16(kvd)).buf("v", dp(s.v), h16(kvd)).buf("q_norm", qn.ptr, qn.bytes).buf("k_norm", kn.ptr, kn.bytes);
  b.scalar("eps", s.eps).scalar("theta", s.theta);
  kernels::Shape plan = choice;
  plan.values[4] = s.capacity;
  ++group_counts_.rope_fused;
  launcher_.run(chooser_.choose_fused(kRopeAttentionOp, "attention_decode", nullptr, choice), plan, b);
}

void DeviceBackend::argmax(Act logits, int64_t m, int64_t vocab, int32_t* tokens) {
  grow(argmax_, size_t(m) * 4, size_t(std::max<int64_t>(m, 16)) * 4);
  Bindings b;
  b.buf("logits", dp(logits), h16(m * vocab)).buf("token", argmax_.ptr(), m * 4);
  run("argmax", nullptr, kernels::Shape{{"M", "V"}, {m, vocab}, "argmax"}, b);
  if (in_step_) {
    token_outputs_.push_back({m, tokens});
    return;
  }
  device_.copy_to_host(tokens, argmax_.ptr(), size_t(m) * 4);
}

// The model reaches SwiGLU and residual adds through the fused ops, which this backend overrides.
void DeviceBackend::silu_mul(Act, Act, int64_t) {
  throw Error("device backend: silu_mul is served by gate_up_swiglu on the device", kExitFailure);
}
void DeviceBackend::add(Act, Act, int64_t) {
  throw Error("device backend: add is served by add_rmsnorm on the device", kExitFailure);
}

}  // namespace qt::rt
