#pragma once
// The op interface the Qwen3 forward pass is written against. The model code only allocates activation
// buffers through a Backend and hands them back to its ops, so a device backend (cuda, emu) implements
// the same ops over device memory and the model code stays unchanged.
//
// Conventions shared by every implementation:
//  * Activations are fp32 matrices, row-major, one row per token. Pointers passed to ops are "device"
//    pointers obtained from Backend::alloc (host memory for the CPU backend); the model never reads them
//    except through download().
//  * Weights are the QTensor views of models/core/weights.h (host memory, usually a file mapping). A
//    device backend uploads or repacks them in prepare() and finds its copy by the view's data address.
//  * Small per-layer vectors (norm weights) are passed as host pointers; they are part of the weights.
//  * Index lists for MoE routing live on the host: the grouping of tokens by expert decides the batch
//    size of each expert's matmul, which the host needs to know anyway to launch them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "models/core/weights.h"

namespace qt::rt {

// How a matmul may treat its activations. kExact keeps them in fp32 even on a fast path; the model uses
// it where a small matrix decides a discrete choice (the MoE router), so quantizing the activations there
// cannot flip which experts run.
enum class MatmulMode { kDefault, kExact };

// One output of a matmul group that shares its input: y = x W^T.
struct MatmulJob {
  const QTensor* w;
  float* y;
};

class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual float* data() = 0;
  virtual size_t size() const = 0;  // in floats
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Called once per model before any op uses its weights (repacking, uploads). Views must outlive the backend.
  virtual void prepare(const ModelWeights& weights) = 0;
  virtual std::unique_ptr<DeviceBuffer> alloc(size_t floats) = 0;
  virtual void upload(const float* host, size_t n, float* dst) = 0;
  virtual void download(const float* src, size_t n, float* host) = 0;
  virtual void copy(const float* src, size_t n, float* dst) = 0;

  // out[i][:] = row tokens[i] of `table` (any weight type), dequantized to fp32.
  virtual void embed(const QTensor& table, const int32_t* tokens, int64_t m, float* out) = 0;
  // y[i][n] = sum_k x[i][k] * W[n][k] for i < m. x is [m][W.cols], y is [m][W.rows]; they do not alias.
  virtual void matmul(const QTensor& w, const float* x, int64_t m, float* y,
                      MatmulMode mode = MatmulMode::kDefault) = 0;
  // Several matmuls of the same input (q/k/v projections, gate/up): one launch where a backend can fuse
  // them. Results equal `count` separate matmul() calls.
  virtual void matmul_group(const MatmulJob* jobs, int count, const float* x, int64_t m) {
    for (int j = 0; j < count; ++j) matmul(*jobs[j].w, x, m, jobs[j].y);
  }
  // Per row of length n: y = weight * x / sqrt(mean(x^2) + eps), statistics in fp32. y may equal x.
  virtual void rmsnorm(const float* x, const float* weight, int64_t rows, int64_t n, float eps, float* y) = 0;
  // In place NeoX-style rotary embedding (element i pairs with i + head_dim/2). x is [m][n_heads*head_dim];
  // row r is at position pos0 + r; angle = pos * theta^(-2i/head_dim) computed in fp32 like transformers.
  virtual void rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t pos0, float theta) = 0;
  // Causal GQA attention of m queries at positions pos0..pos0+m-1 over the cached keys/values of positions
  // 0..pos0+m-1 (already stored). q, out: [m][n_heads*head_dim]; k_cache, v_cache: [ctx][n_kv*head_dim].
  // Query head h reads kv head h / (n_heads / n_kv); scores scaled by head_dim^-0.5, fp32 softmax.
  virtual void attention(const float* q, const float* k_cache, const float* v_cache, int64_t pos0, int64_t m,
                         int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) = 0;
  // gate[i] = silu(gate[i]) * up[i].
  virtual void silu_mul(float* gate, const float* up, int64_t n) = 0;
  // y[i] += x[i].
  virtual void add(float* y, const float* x, int64_t n) = 0;

  // MoE routing of m tokens: softmax (fp32) over all n_experts logits, the top_k largest (ties: lower expert
  // index first), renormalized to sum 1 when `renormalize`. Writes host arrays experts/weights [m][top_k].
  virtual void route(const float* logits, int64_t m, int64_t n_experts, int64_t top_k, bool renormalize,
                     int32_t* experts, float* weights) = 0;
  // dst[j][:] = src[rows[j]][:] for j < count.
  virtual void gather_rows(const float* src, int64_t cols, const int32_t* rows, int64_t count, float* dst) = 0;
  // dst[rows[j]][:] += scale[j] * src[j][:] for j < count (rows distinct within one call).
  virtual void scatter_add_rows(const float* src, int64_t cols, const int32_t* rows, const float* scale,
                                int64_t count, float* dst) = 0;
};

}  // namespace qt::rt
