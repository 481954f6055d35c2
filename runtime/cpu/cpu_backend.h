#pragma once
// The CPU implementation of the Backend ops, in two precisions:
//   reference: every matmul dequantizes weight rows to fp32 and accumulates in double with fp32
//              activations — the plain definition GPU kernels and the fast path are checked against;
//   fast:      multithreaded SIMD kernels chosen for this CPU at run time; Q8_0 / INT8 group-wise / AWQ
//              weights multiply int8-quantized activations (per weight group, scale amax/127, like
//              qwen3.c and llama.cpp); fp16/bf16/fp32 weights keep fp32 activations.
// Non-matmul ops (norms, RoPE, attention, SiLU) are fp32 in both.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <optional>
#include <unordered_map>

#include "runtime/core/backend.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"
#include "kernels_src/cpu_matvec/packed_weights.h"
#include "kernels_src/cpu_matvec/thread_pool.h"

namespace qt::rt {

// A matmul shape as the tuner keys it: weight type, N (rows), K (cols), group size.
using MatvecShapeKey = std::tuple<WeightType, int64_t, int64_t, int64_t>;

struct CpuOptions {
  bool reference = false;
  int threads = 0;              // 0 = all available
  std::optional<Isa> isa;       // default: the best this CPU supports
  int64_t rows_per_task = 0;    // matmul output rows per work item; 0 = chosen from the shape (tunable)
  // Tuned rows per work item for particular shapes (from a `qtune --device cpu` cache); wins over the above.
  std::map<MatvecShapeKey, int64_t> rows_per_task_by_shape;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& options = {});
  ~CpuBackend() override;

  std::string name() const override;
  const CpuOptions& options() const { return options_; }
  Isa isa() const { return kernels_->isa; }
  int threads() const { return pool_.threads(); }

  void prepare(const ModelWeights& weights) override;
  std::unique_ptr<DeviceBuffer> alloc(size_t floats) override;
  void upload(const float* host, size_t n, float* dst) override;
  void download(const float* src, size_t n, float* host) override;
  void copy(const float* src, size_t n, float* dst) override;

  void embed(const QTensor& table, const int32_t* tokens, int64_t m, float* out) override;
  void matmul(const QTensor& w, const float* x, int64_t m, float* y,
              MatmulMode mode = MatmulMode::kDefault) override;
  void matmul_group(const MatmulJob* jobs, int count, const float* x, int64_t m) override;
  void rmsnorm(const float* x, const float* weight, int64_t rows, int64_t n, float eps, float* y) override;
  void rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t pos0, float theta) override;
  void attention(const float* q, const float* k_cache, const float* v_cache, int64_t pos0, int64_t m,
                 int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) override;
  void silu_mul(float* gate, const float* up, int64_t n) override;
  void add(float* y, const float* x, int64_t n) override;
  void route(const float* logits, int64_t m, int64_t n_experts, int64_t top_k, bool renormalize,
             int32_t* experts, float* weights) override;
  void gather_rows(const float* src, int64_t cols, const int32_t* rows, int64_t count, float* dst) override;
  void scatter_add_rows(const float* src, int64_t cols, const int32_t* rows, const float* scale, int64_t count,
                        float* dst) override;

 private:
  const PackedMatrix& packed(const QTensor& w);
  void matmul_reference(const QTensor& w, const float* x, int64_t m, float* y);
  void matmul_float(const QTensor& w, const float* x, int64_t m, float* y);
  void matmul_quantized(const QTensor& w, const PackedMatrix& p, const float* x, int64_t m, float* y);
  int64_t rows_per_task(const QTensor& w) const;

  CpuOptions options_;
  const CpuKernels* kernels_;
  ThreadPool pool_;
  std::mutex packed_mutex_;
  std::unordered_map<const void*, std::unique_ptr<PackedMatrix>> packed_;
};

}  // namespace qt::rt
