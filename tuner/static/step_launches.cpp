#include "tuner/static/step_launches.h"

#include <algorithm>
#include <sstream>

#include "common/error.h"
#include "device/blas/blas_lt.h"
#include "device/blas/default_route.h"
#include "kernels_src/attention/attention_family.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/moe_stream/moe_stream_family.h"
#include "kernels_src/registry/registry.h"
#include "models/core/linear_shapes.h"
#include "models/core/weights.h"

namespace qt::tune {
namespace {

using kernels::Shape;

// The model's linear shape whose label names `part` ("wq" in "wq+wo"): the one list of shapes, not a copy.
const LinearShape& linear_shape(const std::vector<LinearShape>& shapes, const std::string& part) {
  for (const LinearShape& s : shapes) {
    std::stringstream parts(s.label);
    for (std::string p; std::getline(parts, p, '+');)
      if (p == part) return s;
  }
  throw Error("step model: the model's linear shapes have no '" + part + "'");
}

// Appends the launches of one chunk of tokens, op by op, as the runtime's methods of the same names issue them.
struct Builder {
  const StepSpec& spec;
  const std::vector<LinearShape> shapes;
  std::vector<StepLaunch> out;

  void add(std::string op, std::optional<WeightType> type, Shape shape, std::string what, int64_t count) {
    StepLaunch l{std::move(op), type, shape, shape, std::move(what), count};
    out.push_back(std::move(l));
  }

  // What the runtime holds a dense projection as: fp16 when predequantized, else its type, in the frag layout
  // where that holds the type (device_backend.cpp's visit_weights).
  WeightType dense_type() const { return spec.runtime.predequantize ? WeightType::F16 : spec.weights.dense; }
  bool dense_frag() const {
    return !spec.runtime.predequantize && spec.runtime.frag_layout && kernels::frag::frag_layout_holds(spec.weights.dense);
  }

  // DeviceBackend::linear without a tuned dispatch: blas::default_route picks cuBLASLt (fp16 weights) or the
  // type's dequant family then cuBLASLt, else the families of "linear" or "linear.frag" by the layout the
  // weight is held in.
  void linear(WeightType type, int64_t group, bool frag, int64_t n, int64_t k, int64_t m, const std::string& what,
              int64_t count) {
    // Unquantized weights are one group per row (the runtime's fp16 tensors carry G = K).
    const int64_t g = weight_traits(type).quantized ? group : k;
    const Shape shape{{"M", "N", "K", "G"}, {m, n, k, g}, what};
    const std::string op = frag ? "linear.frag" : "linear";
    switch (blas::default_route(type, frag, m, spec.runtime.blas)) {
      case blas::Route::kCublasLt: return add("cublaslt", type, shape, what, count);
      case blas::Route::kDequantCublasLt:
        if (!spec.runtime.dequant_blas) break;
        if (const blas::Baseline* row = blas::baseline_for(type, op)) {
          const kernels::KernelFamily& dq = kernels::find_family(row->dequant_family);
          add(dq.op, type, dq.shape_from(shape), what + " dequant", count);
          return add("cublaslt", WeightType::F16, shape, what, count);
        }
        break;
      case blas::Route::kFamilies: break;
    }
    add(op, type, shape, what, count);
  }
  void dense(const std::string& part, int64_t m, const std::string& what, int64_t count) {
    const LinearShape& s = linear_shape(shapes, part);
    // DeviceBackend::linear: a frag-layout weight's fp16 copy (prefill_f16) serves from blas::kF16CopyRows rows.
    if (spec.runtime.prefill_f16 && dense_frag() && m >= blas::kF16CopyRows)
      return linear(WeightType::F16, s.k, false, s.n, s.k, m, what, count);
    linear(dense_type(), spec.weights.dense_group, dense_frag(), s.n, s.k, m, what, count);
  }

  void rmsnorm(int64_t m, bool residual, const std::string& what, int64_t count) {
    add("rmsnorm", std::nullopt, Shape{{"M", "N", "R"}, {m, spec.config.dim, residual ? 1 : 0}, "rmsnorm"}, what,
        count);
  }

  // Qwen3Model::attention_block: q/k/v, q/k norm + RoPE + KV write, attention, o_proj.
  void attention_block(int64_t m, int64_t pos0, int64_t layers) {
    qkv(m, layers);
    attention(m, pos0, layers);
    dense("wo", m, "o_proj", layers);
  }

  // q/k norm + RoPE + KV write, then attention over the cache (DeviceBackend::rope_attention): one launch at
  // decode with the norms fused.
  void attention(int64_t m, int64_t pos0, int64_t layers) {
    const ModelConfig& c = spec.config;
    const bool fused = spec.runtime.fuse_norm && m == 1 && serves("rope_attention_decode");
    if (fused) return attention_launch("rope_attention_decode", m, pos0, "rope + attention", layers);
    // qk_norm_rope_kv writes the step's own rows of the cache: modelled on a cache of those rows, since its
    // buffers would count the whole cache it is bound to.
    add("qk_norm_rope_kv", std::nullopt,
        Shape{{"M", "H", "KVH", "D", "C", "P"}, {m, c.n_heads, c.n_kv_heads, c.head_dim, m, 0}, "qk_norm_rope_kv"},
        "q/k norm + rope + kv write", layers);
    attention_launch(m == 1 ? "attention_decode" : "attention_prefill", m, pos0, "attention", layers);
  }

  // The kernel reads the true position from device memory; the runtime chooses its point by the bucket.
  void attention_launch(const std::string& op, int64_t m, int64_t pos0, const std::string& what, int64_t layers) {
    const ModelConfig& c = spec.config;
    const Shape run{{"M", "H", "KVH", "D", "C", "P"}, {m, c.n_heads, c.n_kv_heads, c.head_dim, pos0 + m, pos0},
                    "attention"};
    StepLaunch l{op, std::nullopt, run, run, what + " at context " + std::to_string(pos0 + m), layers};
    l.choice_shape = kernels::attention::choice_shape(m, c.n_heads, c.n_kv_heads, c.head_dim, pos0 + m);
    out.push_back(l);
  }

  // DeviceBackend::fuses_norm: every layer's attention matmuls on the fused stream families, q|k|v concatenated
  // in the frag layout; a dense MLP's gate|up concatenated too, a MoE block's finalize adding into x.
  bool fuses_norm(int64_t m) const {
    const ModelConfig& c = spec.config;
    if (!spec.runtime.fuse_norm || !dense_frag() || !spec.runtime.concatenate_qkv ||
        m > std::min(kConcatenatedQkvMaxRows, kConcatenatedGateUpMaxRows))
      return false;
    const WeightType t = dense_type();
    if (!storable({c.q_dim(), c.kv_dim(), c.kv_dim()}) || !serves(kernels::frag::kNormLinearOp, t) ||
        !serves(kernels::frag::kResidualOp, t))
      return false;
    if (c.is_moe()) return serves("moe_finalize_residual");
    const LinearShape& up = linear_shape(shapes, "w1");
    return spec.runtime.concatenate_gate_up && storable({up.n, up.n}) && serves(kernels::frag::kNormGateUpOp, t);
  }

  // Qwen3Model::run_chunk's layers with the norms fused: norm + q|k|v, attention, o_proj + residual, then
  // norm + gate|up + SwiGLU and down_proj + residual; or o_proj + residual writing the MoE block's norm, and the
  // block adding its output.
  void fused_layers(int64_t m, int64_t pos0, int64_t layers) {
    const WeightType t = dense_type();
    const int64_t g = spec.weights.dense_group;
    auto stream = [&](const std::string& op, const std::string& part, const std::string& what) {
      const LinearShape& s = linear_shape(shapes, part);
      add(op, t, Shape{{"M", "N", "K", "G"}, {m, s.n, s.k, g}, what}, what, layers);
    };
    stream(kernels::frag::kNormLinearOp, "wq|wk|wv", "norm + q|k|v");
    attention(m, pos0, layers);
    if (spec.config.is_moe()) {
      // DeviceBackend::matmul_residual_rmsnorm: o_proj writes the ffn norm where a family serves it.
      if (serves(kernels::frag::kResidualNormOp, t)) {
        stream(kernels::frag::kResidualNormOp, "wo", "o_proj + residual + ffn norm");
      } else {
        stream(kernels::frag::kResidualOp, "wo", "o_proj + residual");
        rmsnorm(m, false, "ffn norm", layers);
      }
      return moe(m, layers, true);
    }
    stream(kernels::frag::kResidualOp, "wo", "o_proj + residual");
    stream(kernels::frag::kNormGateUpOp, "w1", "norm + gate|up + SwiGLU");
    stream(kernels::frag::kResidualOp, "w2", "down_proj + residual");
  }

  // Whether the device can store these dense parts as one matrix (device_weights.cpp's concatenation_kind):
  // in the frag layout each part whole 64-column tiles; fp16 always; the file layout where rows are outputs.
  bool storable(std::initializer_list<int64_t> part_rows) const {
    if (dense_frag()) {
      for (int64_t n : part_rows)
        if (n % kernels::frag::kTileN) return false;
      return true;
    }
    return dense_type() == WeightType::F16 || !weight_traits(dense_type()).in_major;
  }

  // matmul_group: one linear over [wq; wk; wv] at one row where the runtime concatenates them.
  void qkv(int64_t m, int64_t layers) {
    const ModelConfig& c = spec.config;
    if (spec.runtime.concatenate_qkv && m <= kConcatenatedQkvMaxRows && storable({c.q_dim(), c.kv_dim(), c.kv_dim()}))
      return dense("wq|wk|wv", m, "q|k|v", layers);
    dense("wq", m, "q_proj", layers);
    dense("wk", m, "k_proj", layers);
    dense("wv", m, "v_proj", layers);
  }

  // DeviceBackend::gate_up_swiglu, then the down projection.
  void dense_mlp(int64_t m, int64_t layers) {
    const LinearShape& up = linear_shape(shapes, "w1");
    const WeightType t = dense_type();
    const int64_t g = weight_traits(t).quantized ? spec.weights.dense_group : 0;
    const Shape fused{{"M", "N", "K", "G"}, {m, up.n, up.k, g}, "gate+up"};
    if (dense_frag() && spec.runtime.concatenate_gate_up && m <= kConcatenatedGateUpMaxRows &&
        storable({up.n, up.n}) && serves("gate_up_swiglu.frag", t)) {
      add("gate_up_swiglu.frag", t, fused, "gate|up + SwiGLU", layers);
    } else if (!dense_frag() && m <= blas::kDecodeGemvRows && serves("gate_up_swiglu", t)) {
      add("gate_up_swiglu", t, fused, "gate+up + SwiGLU", layers);
    } else {
      dense("w1", m, "gate_proj", layers);
      dense("w3", m, "up_proj", layers);
      add("swiglu", std::nullopt, Shape{{"M", "N"}, {m, up.n}, "swiglu"}, "SwiGLU", layers);
    }
    dense("w2", m, "down_proj", layers);
  }

  // DeviceBackend::moe: router, gating, grouped gate/up and down (each plan aligns its own blocks), finalize
  // (adding into the hidden state: moe_residual), or with the residual in frag-layout experts at decode, the
  // routed GEMVs.
  void moe(int64_t m, int64_t layers, bool residual = false) {
    const ModelConfig& c = spec.config;
    const LinearShape& router = linear_shape(shapes, "router");
    const WeightType rt = spec.runtime.predequantize ? WeightType::F16 : spec.weights.router;
    linear(rt, spec.weights.router_group, false, router.n, router.k, m, "router", layers);
    const WeightType et = spec.weights.expert;
    const bool trtllm = spec.runtime.trtllm_int8 && (et == WeightType::INT8_GW_SYM || et == WeightType::INT8_GW_ASYM);
    const bool frag = spec.runtime.frag_experts && kernels::frag::frag_layout_holds(et);
    const LinearShape& w1 = linear_shape(shapes, "expert.w1");
    const LinearShape& w2 = linear_shape(shapes, "expert.w2");
    const int64_t g = spec.weights.expert_group;
    if (residual && frag) {
      // DeviceBackend::moe_stream: the two routed GEMVs on the router's logits where they serve the layer.
      const int64_t e = c.num_experts, k = c.num_experts_per_tok;
      const Shape front = kernels::moe_stream::gate_up_shape(m, e, k, c.norm_topk_prob, c.dim, w1.n, g);
      const Shape back = kernels::moe_stream::down_shape(m, e, k, c.norm_topk_prob, c.dim, w1.n, g);
      if (kernels::moe_stream::serves_decode(et, front, back)) {
        add(kernels::moe_stream::kGateUpOp, et, front, "experts gate|up + SwiGLU (top-k in each block)", layers);
        add(kernels::moe_stream::kDownResidualOp, et, back, "experts down + combine + residual", layers);
        return;
      }
    }
    add("moe_gating", std::nullopt,
        Shape{{"M", "E", "K", "R"}, {m, c.num_experts, c.num_experts_per_tok, c.norm_topk_prob ? 1 : 0}, "router"},
        "gating (top-k)", layers);
    const std::string suffix = frag ? ".frag" : trtllm ? ".trtllm" : "";
    const std::vector<std::string> dims = {"T", "E", "TOPK", "N", "K", "G"};
    // The grouped GEMMs read the experts the step's rows are routed to, at most m x top-k of them: modelled on
    // that many experts, since their buffers count every expert of the stack.
    const int64_t touched = std::min<int64_t>(c.num_experts, m * c.num_experts_per_tok);
    auto grouped = [&](const std::string& op, const LinearShape& s, const char* label, const char* what) {
      const Shape all{dims, {m, c.num_experts, c.num_experts_per_tok, s.n, s.k, g}, label};
      StepLaunch l{op, et, all, all, what, layers};
      l.shape.values[1] = touched;
      out.push_back(l);
    };
    grouped("moe_gate_up" + suffix, w1, "expert.w1+w3", "experts gate|up");
    grouped("moe_down" + suffix, w2, "expert.w2", "experts down");
    add(residual ? "moe_finalize_residual" : "moe_finalize", std::nullopt,
        Shape{{"M", "K", "H"}, {m, c.num_experts_per_tok, c.dim}, "finalize"},
        residual ? "finalize + residual" : "finalize", layers);
  }

  // Whether a device family serves `op` (on weights of type `t`, when given).
  bool serves(const std::string& op, std::optional<WeightType> t = std::nullopt) const {
    for (const kernels::KernelFamily* f : kernels::all_families())
      if (!f->on_host() && f->op == op && (!t || f->serves(*t))) return true;
    return false;
  }

  // Qwen3Model::run_chunk for `m` tokens at `pos0`; the last chunk of a forward ends with the lm_head on its
  // last row and the argmax (forward_greedy).
  void chunk(int64_t m, int64_t pos0, bool last) {
    const ModelConfig& c = spec.config;
    const int64_t layers = c.n_layers;
    const WeightType et = spec.weights.embedding;
    const bool q = weight_traits(et).quantized;
    // The embedding gathers m rows of the table: modelled on a table of m rows, since its buffers would count
    // the whole table; the runtime chooses by the whole one.
    const Shape table = q ? Shape{{"M", "N", "V", "G"}, {m, c.dim, c.vocab_size, spec.weights.embedding_group}, "embedding"}
                          : Shape{{"M", "N", "V"}, {m, c.dim, c.vocab_size}, "embedding"};
    StepLaunch embed{"embedding", et, table, table, "embedding", 1};
    embed.shape.values[2] = m;
    out.push_back(embed);
    const bool fused = fuses_norm(m);
    if (fused) fused_layers(m, pos0, layers);
    else unfused_layers(m, pos0, layers);
    if (!last) return;
    // Fused, the last block has added its output to x already.
    rmsnorm(1, !fused, fused ? "final norm" : "residual + final norm", 1);
    const LinearShape& head = linear_shape(shapes, "lm_head");
    const WeightType ht = spec.runtime.predequantize ? WeightType::F16 : spec.weights.head;
    linear(ht, spec.weights.head_group, false, head.n, head.k, 1, "lm_head", 1);
    add("argmax", std::nullopt, Shape{{"M", "V"}, {1, c.vocab_size}, "argmax"}, "argmax", 1);
  }

  // Each layer's norms as their own launches, the residual add in the norm after each block.
  void unfused_layers(int64_t m, int64_t pos0, int64_t layers) {
    const ModelConfig& c = spec.config;
    rmsnorm(m, false, "attn norm (layer 0)", 1);
    if (layers > 1) rmsnorm(m, true, "residual + attn norm", layers - 1);
    attention_block(m, pos0, layers);
    rmsnorm(m, true, "residual + ffn norm", layers);
    if (c.is_moe()) moe(m, layers);
    else dense_mlp(m, layers);
  }
};

}  // namespace

std::vector<StepLaunch> step_launches(const StepSpec& spec) {
  if (spec.context < (spec.decode ? 0 : 1))
    throw Error(spec.decode ? "step model: a decode context is at least 0 tokens" : "step model: a prefill has at least 1 token");
  Builder b{spec, model_linear_shapes(spec.config, nullptr), {}};
  if (spec.decode) {
    b.chunk(1, spec.context, true);
  } else {
    const int64_t chunk = spec.runtime.prefill_chunk > 0 ? spec.runtime.prefill_chunk : blas::prefill_chunk(spec.runtime.blas);
    for (int64_t start = 0; start < spec.context; start += chunk) {
      const int64_t m = std::min(chunk, spec.context - start);
      b.chunk(m, start, start + m == spec.context);
    }
  }
  return b.out;
}

StepWeights step_weights(const ModelWeights& mw) {
  if (mw.layers.empty()) throw Error("step model: the model has no layers");
  const LayerWeights& l = mw.layers.front();
  StepWeights w;
  w.dense = l.wq.type, w.dense_group = l.wq.group_size;
  w.embedding = mw.embedding.type, w.embedding_group = mw.embedding.group_size;
  const QTensor& head = mw.classifier.empty() ? mw.embedding : mw.classifier;
  w.head = head.type, w.head_group = head.group_size;
  if (!l.router.empty()) w.router = l.router.type, w.router_group = l.router.group_size;
  if (!l.expert_w1.empty()) w.expert = l.expert_w1.base.type, w.expert_group = l.expert_w1.base.group_size;
  return w;
}

StepBytes step_min_bytes(const StepSpec& spec) {
  const ModelConfig& c = spec.config;
  const std::vector<LinearShape> shapes = model_linear_shapes(c, nullptr);
  auto bytes = [](WeightType t, int64_t n, int64_t k, int64_t g) {
    QTensor q;
    q.type = t, q.rows = n, q.cols = k, q.group_size = int32_t(weight_traits(t).quantized ? g : 0);
    return double(q.storage_bytes());
  };
  const StepWeights& w = spec.weights;
  // A prefill on the fp16 copies (prefill_f16) reads them, where the frag layout holds the type; decode reads the
  // quantized weights.
  const bool f16_copy = spec.runtime.prefill_f16 && !spec.decode && spec.context >= blas::kF16CopyRows &&
                        spec.runtime.frag_layout && kernels::frag::frag_layout_holds(w.dense);
  const WeightType dense = spec.runtime.predequantize || f16_copy ? WeightType::F16 : w.dense;
  StepBytes b;
  double layer = 0;
  for (const char* part : {"wq", "wk", "wv", "wo"}) {
    const LinearShape& s = linear_shape(shapes, part);
    layer += bytes(dense, s.n, s.k, w.dense_group);
  }
  if (c.is_moe()) {
    const LinearShape& r = linear_shape(shapes, "router");
    layer += bytes(spec.runtime.predequantize ? WeightType::F16 : w.router, r.n, r.k, w.router_group);
    for (const char* part : {"expert.w1", "expert.w3", "expert.w2"}) {
      const LinearShape& s = linear_shape(shapes, part);
      layer += double(c.num_experts_per_tok) * bytes(w.expert, s.n, s.k, w.expert_group);
    }
  } else {
    for (const char* part : {"w1", "w3", "w2"}) {
      const LinearShape& s = linear_shape(shapes, part);
      layer += bytes(dense, s.n, s.k, w.dense_group);
    }
  }
  const LinearShape& head = linear_shape(shapes, "lm_head");
  const WeightType ht = spec.runtime.predequantize ? WeightType::F16 : w.head;
  b.weights = layer * double(c.n_layers) + bytes(ht, head.n, head.k, w.head_group) +
              bytes(w.embedding, 1, c.dim, w.embedding_group);  // one embedding row per token
  // K and V rows of every position the step attends to, fp16.
  const double positions = spec.decode ? double(spec.context + 1) : double(spec.context);
  b.kv = 2.0 * double(c.kv_dim()) * 2.0 * positions * double(c.n_layers);
  return b;
}

}  // namespace qt::tune
