#pragma once
// The op interface the Qwen3 forward pass is written against. The model only allocates activation buffers
// through a Backend and hands views of them back to its ops, so the CPU backend (fp32 on the host) and the
// device backend (fp16 on an emulated or real GPU) run the same model code.
//
// Conventions shared by every implementation:
//  * Activations are row-major matrices, one row per token, of the backend's activation type (act_type():
//    fp32 on the CPU, fp16 on a device). An Act is a view into backend memory (a host pointer on the CPU, a
//    device address on a GPU); the model never dereferences it and moves data only through upload/download,
//    which convert from and to fp32.
//  * Weights are the QTensor views of models/core/weights.h (host memory, usually a file mapping). A device
//    backend uploads or repacks them in prepare() and finds its copy by the view's data address.
//  * Small per-layer vectors (norm weights) are passed as host pointers; they are part of the weights.
//  * The KV cache is memory the model allocates through alloc_kv(): per layer [capacity][n_kv*head_dim], of the
//    activation type unless a backend keeps it narrower (its views carry their type).
//  * A MoE block is one op: routing, the grouping of routed rows by expert and the grouped expert matmuls all
//    stay in the backend's memory (on a device nothing comes back to the host, so MoE decode steps are
//    captured like dense ones).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "models/core/weights.h"

namespace qt::rt {

enum class ActType : uint8_t { F32, F16 };
inline size_t act_size(ActType t) { return t == ActType::F32 ? 4 : 2; }
inline const char* act_type_name(ActType t) { return t == ActType::F32 ? "fp32" : "fp16"; }

// A view of activations in a backend's memory. Offsets count elements of the view's type.
struct Act {
  uint64_t addr = 0;
  ActType type = ActType::F32;
  explicit operator bool() const { return addr != 0; }
  Act at(int64_t elements) const { return {addr + uint64_t(elements) * act_size(type), type}; }
  // The host pointer of an fp32 view (CPU backend only).
  float* f32() const { return reinterpret_cast<float*>(addr); }
};

// How a matmul may treat its activations. kExact keeps them in fp32 even on a fast path; the model uses
// it where a small matrix decides a discrete choice (the MoE router), so quantizing the activations there
// cannot flip which experts run.
enum class MatmulMode { kDefault, kExact };

// One output of a matmul group that shares its input: y = x W^T.
struct MatmulJob {
  const QTensor* w;
  Act y;
};

class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual Act view() = 0;
  virtual size_t size() const = 0;  // in elements
};

// One attention block's q/k treatment and cache write, the inputs of Backend::qk_norm_rope_kv.
struct QkRopeKv {
  Act q, k, v;                      // [m][n_heads*head_dim], [m][n_kv*head_dim] x2: projections
  const float* q_norm = nullptr;    // [head_dim]
  const float* k_norm = nullptr;    // [head_dim]
  int64_t m = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t pos0 = 0;                 // tokens cached before these
  float eps = 1e-6f, theta = 1e6f;
  Act k_cache, v_cache;             // this layer's [capacity][n_kv*head_dim]
  int64_t capacity = 0;
  Act q_out;                        // [m][n_heads*head_dim]: normalized and rotated queries
};

// One MoE block's weights and routing settings: the router and the layer's stacked experts.
struct MoeBlock {
  const QTensor* router = nullptr;      // [E][dim]
  const ExpertStack* gate = nullptr;    // [E] x [hidden][dim]
  const ExpertStack* up = nullptr;      // [E] x [hidden][dim]
  const ExpertStack* down = nullptr;    // [E] x [dim][hidden]
  int64_t top_k = 0;
  bool renormalize = false;             // norm_topk_prob
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual ActType act_type() const = 0;

  // Prompt tokens Qwen3Model runs as one chunk unless told otherwise: what suits this backend's kernels.
  virtual int64_t prefill_chunk() const { return 256; }
  // Called once per model before any op uses its weights (repacking, uploads). Views must outlive the backend.
  virtual void prepare(const ModelWeights& weights) = 0;
  virtual std::unique_ptr<DeviceBuffer> alloc(size_t elements) = 0;
  // Memory for a KV cache: activation memory unless a backend stores keys and values in another type (the CPU
  // fast path keeps them fp16, as llama.cpp does). upload/download convert it like any view.
  virtual std::unique_ptr<DeviceBuffer> alloc_kv(size_t elements) { return alloc(elements); }
  virtual void upload(const float* host, size_t n, Act dst) = 0;   // converts to the activation type
  virtual void download(Act src, size_t n, float* host) = 0;       // converts to fp32

  // out[i][:] = row tokens[i] of `table` (any weight type), dequantized. `tokens` is a host array.
  virtual void embed(const QTensor& table, const int32_t* tokens, int64_t m, Act out) = 0;
  // y[i][n] = sum_k x[i][k] * W[n][k] for i < m. x is [m][W.cols], y is [m][W.rows]; they do not alias.
  virtual void matmul(const QTensor& w, Act x, int64_t m, Act y, MatmulMode mode = MatmulMode::kDefault) = 0;
  // Several matmuls of the same input (q/k/v projections, gate/up): one launch where a backend can fuse
  // them. Results equal `count` separate matmul() calls.
  virtual void matmul_group(const MatmulJob* jobs, int count, Act x, int64_t m) {
    for (int j = 0; j < count; ++j) matmul(*jobs[j].w, x, m, jobs[j].y);
  }
  // The MLP front: h = silu(x Wg^T) * (x Wu^T). `up` is [m][Wu.rows] scratch a backend may use.
  virtual void gate_up_swiglu(const QTensor& gate, const QTensor& up_w, Act x, int64_t m, Act h, Act up) {
    const MatmulJob jobs[2] = {{&gate, h}, {&up_w, up}};
    matmul_group(jobs, 2, x, m);
    silu_mul(h, up, m * gate.rows);
  }
  // Per row of length n: x += residual (when given), then y = weight * x / sqrt(mean(x^2) + eps) with
  // statistics in fp32. y does not alias x.
  virtual void add_rmsnorm(Act x, Act residual, const float* weight, int64_t rows, int64_t n, float eps, Act y) = 0;
  // The RMSNorm of a decode step's residual stream fused into the matmuls beside it, where a backend offers it for
  // this layer and batch (fuses_norm): the norm before q|k|v and before gate|up runs inside those matmuls, and
  // o_proj and down_proj (or the MoE block, moe_residual) add their outputs to x themselves, so a dense layer has no
  // norm launch of its own and a MoE layer only the one before its router, which o_proj may write
  // (matmul_residual_rmsnorm; a device backend then also runs rope_attention as one launch).
  // Results equal add_rmsnorm followed by the plain ops (up to the order of the norm's sum of squares).
  virtual bool fuses_norm(const LayerWeights& layer, int64_t m) const {
    (void)layer, (void)m;
    return false;
  }
  // jobs' y = RMSNorm(x) W^T, x unchanged; `xn` [m][cols] is scratch a backend may use for the normalized rows.
  virtual void rmsnorm_matmul_group(Act x, const float* weight, float eps, const MatmulJob* jobs, int count, int64_t m,
                                    Act xn) {
    add_rmsnorm(x, Act{}, weight, m, jobs[0].w->cols, eps, xn);
    matmul_group(jobs, count, xn, m);
  }
  // gate_up_swiglu over RMSNorm(x), x unchanged; `xn` as above.
  virtual void rmsnorm_gate_up_swiglu(Act x, const float* weight, float eps, const QTensor& gate, const QTensor& up_w,
                                      int64_t m, Act h, Act up, Act xn) {
    add_rmsnorm(x, Act{}, weight, m, gate.cols, eps, xn);
    gate_up_swiglu(gate, up_w, xn, m, h, up);
  }
  // x += a W^T; `y` [m][W.rows] is scratch a backend may use for the product.
  virtual void matmul_residual(const QTensor& w, Act a, int64_t m, Act x, Act y) {
    matmul(w, a, m, y);
    add(x, y, m * w.rows);
  }
  // matmul_residual, then xn = RMSNorm(x) with `weight`: o_proj before a MoE block, whose router and experts both
  // read the normalized rows, so that a backend may write the norm from the matmul's own last blocks.
  virtual void matmul_residual_rmsnorm(const QTensor& w, Act a, int64_t m, Act x, Act y, const float* weight, float eps,
                                       Act xn) {
    matmul_residual(w, a, m, x, y);
    add_rmsnorm(x, Act{}, weight, m, w.rows, eps, xn);
  }
  // x += the MoE block's output for the normalized rows `xn` (moe below); `y` [m][dim] is scratch as above.
  virtual void moe_residual(const MoeBlock& block, Act xn, int64_t m, Act x, Act y) {
    moe(block, xn, m, y);
    add(x, y, m * block.gate->base.cols);
  }
  // Per-head RMSNorm of q and k, NeoX rotary embedding at positions pos0..pos0+m-1 (element i pairs with
  // i + head_dim/2; angle = pos * theta^(-2i/head_dim) in fp32 like transformers), and the write of the
  // rotated k and of v into rows pos0.. of the layer's cache.
  virtual void qk_norm_rope_kv(const QkRopeKv& s) = 0;
  // qk_norm_rope_kv(s), then attention of the rotated queries into `out` [m][n_heads*head_dim]: one op, so that
  // a backend may run both in one launch (a device's decode step with fuses_norm). s.q_out is scratch there.
  virtual void rope_attention(const QkRopeKv& s, Act out) {
    qk_norm_rope_kv(s);
    attention(s.q_out, s.k_cache, s.v_cache, s.capacity, s.pos0, s.m, s.n_heads, s.n_kv_heads, s.head_dim, out);
  }
  // Causal GQA attention of m queries at positions pos0..pos0+m-1 over the cached keys/values of positions
  // 0..pos0+m-1 (already stored). q, out: [m][n_heads*head_dim]; caches: [capacity][n_kv*head_dim].
  // Query head h reads kv head h / (n_heads / n_kv); scores scaled by head_dim^-0.5, fp32 softmax.
  virtual void attention(Act q, Act k_cache, Act v_cache, int64_t capacity, int64_t pos0, int64_t m,
                         int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, Act out) = 0;
  // gate[i] = silu(gate[i]) * up[i].
  virtual void silu_mul(Act gate, Act up, int64_t n) = 0;
  // y[i] += x[i].
  virtual void add(Act y, Act x, int64_t n) = 0;
  // tokens[i] = the index of the largest of logits[i][0..vocab), ties to the lowest index (host array):
  // greedy decoding without bringing the logits back. NaN never wins; a row of NaN gives -1.
  virtual void argmax(Act logits, int64_t m, int64_t vocab, int32_t* tokens) = 0;

  // The MoE MLP of m tokens x [m][dim] into out [m][dim]: router logits (fp32 activations on the CPU), gating
  // (fp32 softmax over all experts, the top_k largest with ties to the lower expert index, renormalized when
  // asked), then out[t] = sum over t's experts e of weight_e * down_e(silu(gate_e x_t) * up_e x_t). Routed rows
  // are grouped by expert and each projection is one grouped call over every expert.
  virtual void moe(const MoeBlock& block, Act x, int64_t m, Act out) = 0;

  // A forward step over `m` tokens at positions pos0.. is bracketed by begin_step/end_step. Host outputs
  // of download and argmax inside it are complete when end_step returns, not before: a device
  // backend may queue the whole step and replay a captured one (a CUDA graph of a decode step, whose launch
  // sequence is the same at every position because positions and tokens are read from device memory).
  // `tokens` is the step's host token array; embed() is called with the same pointer.
  virtual void begin_step(const int32_t* tokens, int64_t m, int64_t pos0) {
    (void)tokens, (void)m, (void)pos0;
  }
  virtual void end_step() {}
};

}  // namespace qt::rt
