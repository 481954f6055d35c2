#pragma once
// The CPU implementation of the Backend ops, in two precisions:
//   reference: every matmul dequantizes weight rows to fp32 and accumulates in double with fp32
//              activations — the plain definition GPU kernels and the fast path are checked against;
//   fast:      multithreaded SIMD kernels chosen for this CPU at run time; Q8_0 / INT8 group-wise / AWQ
//              weights multiply int8-quantized activations (per weight group, scale amax/127, like
//              qwen3.c and llama.cpp); fp16/bf16/fp32 weights keep fp32 activations. The Q8_0,
//              INT8_GW_SYM and AWQ INT4 matrices (attention, dense MLP, classifier, MoE experts) are repacked
//              by prepare() for the tiled GEMM of q8_gemm_kernels.h (AWQ's nibbles in U4 panels), which
//              serves prefill and decode; INT8_GW_ASYM keeps the row-by-row matvec. Where the CPU has
//              AMX-INT8 and Linux grants the tiles, that GEMM multiplies 8 or more tokens on AMX tiles (same
//              bits as VNNI), and fewer (decode) with AVX-512 VNNI.
// Non-matmul ops (norms, RoPE, attention, SiLU) are fp32 in both; activations are fp32 host memory. The KV
// cache is fp32 on the reference path and fp16 on the fast one for dense models (llama.cpp's default; see
// CpuOptions::kv_cache), where attention runs the SIMD loops of attention_kernels.h split over heads and, for
// long contexts, over cached positions.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <optional>
#include <unordered_map>
#include <vector>

#include "runtime/core/backend.h"
#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/q8_gemm_kernels.h"
#include "runtime/cpu/q8_repack.h"
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
  // The fast path's KV-cache type (the reference path's is fp32). Unset: fp16, which halves the cache and the
  // bytes attention reads at depth, except for MoE models: rounding keys or values to fp16 moves the hidden
  // state enough to flip near-tied expert choices (the golden MoE models' router gap is 0.0116), so MoE keeps
  // fp32, for the reason the router itself runs on fp32 activations. prepare() applies the MoE rule.
  std::optional<ActType> kv_cache;
  // The Q8_0 GEMM's matrix unit. Unset: AMX tiles where amx_support() (amx_support.h) says this process may
  // use them and the ISA is AVX-512 VNNI, else none. Asking for kAmx where they are not usable throws.
  std::optional<TileUnit> tiles;
  // Where the Q8_0 GEMM's decode asks for the weight line 2 KB ahead: L2, L1 or nowhere (q8_gemm_kernels_for says
  // why this is a per-CPU choice). Unset: the tuning store's choice where qrun or qbench was given one
  // (apply_tuned_cache), else L2.
  std::optional<DecodePrefetch> decode_prefetch;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& options = {});
  ~CpuBackend() override;

  std::string name() const override;
  const CpuOptions& options() const { return options_; }
  Isa isa() const { return kernels_->isa; }
  TileUnit tiles() const { return tiles_; }
  // Between two forward passes: the GEMM tables of another decode prefetch (the outputs are the same bits).
  void set_decode_prefetch(DecodePrefetch prefetch);
  int threads() const { return pool_.threads(); }
  ActType kv_type() const { return kv_type_; }

  ActType act_type() const override { return ActType::F32; }
  void prepare(const ModelWeights& weights) override;
  std::unique_ptr<DeviceBuffer> alloc(size_t elements) override;
  std::unique_ptr<DeviceBuffer> alloc_kv(size_t elements) override;
  void upload(const float* host, size_t n, Act dst) override;
  void download(Act src, size_t n, float* host) override;

  void embed(const QTensor& table, const int32_t* tokens, int64_t m, Act out) override;
  void matmul(const QTensor& w, Act x, int64_t m, Act y, MatmulMode mode = MatmulMode::kDefault) override;
  void matmul_group(const MatmulJob* jobs, int count, Act x, int64_t m) override;
  void add_rmsnorm(Act x, Act residual, const float* weight, int64_t rows, int64_t n, float eps, Act y) override;
  void qk_norm_rope_kv(const QkRopeKv& s) override;
  void attention(Act q, Act k_cache, Act v_cache, int64_t capacity, int64_t pos0, int64_t m, int64_t n_heads,
                 int64_t n_kv_heads, int64_t head_dim, Act out) override;
  void silu_mul(Act gate, Act up, int64_t n) override;
  void add(Act y, Act x, int64_t n) override;
  void argmax(Act logits, int64_t m, int64_t vocab, int32_t* tokens) override;
  void moe(const MoeBlock& block, Act x, int64_t m, Act out) override;  // cpu_moe.cpp

  // The fp32 host kernels behind the ops, for tests that check them one by one.
  void matmul(const QTensor& w, const float* x, int64_t m, float* y, MatmulMode mode = MatmulMode::kDefault) {
    matmul(w, host(x), m, host(y), mode);
  }
  // Per row of length n: y = weight * x / sqrt(mean(x^2) + eps), statistics in fp32. y may equal x.
  void rmsnorm(const float* x, const float* weight, int64_t rows, int64_t n, float eps, float* y);
  // In place NeoX-style rotary embedding of x [m][n_heads*head_dim], row r at position pos0 + r.
  void rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t pos0, float theta);
  void attention(const float* q, const float* k_cache, const float* v_cache, int64_t pos0, int64_t m,
                 int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out);
  // Gives a Q8_0 (or INT8_GW_SYM) matrix the GEMM layout (prepare() does it for every such matrix of a
  // model); a no-op on the reference path or for a matrix that cannot take it. Returns whether w now has it.
  bool repack(const QTensor& w);
  // The same for several matrices at once, into one allocation (a MoE projection's experts); false, and
  // nothing done, if any cannot take the layout.
  bool repack(const std::vector<QTensor>& ws);
  // Whether w has the GEMM layout now.
  bool has_gemm_layout(const QTensor& w) const { return repacked(w) != nullptr; }
  static Act host(const float* p) { return Act{reinterpret_cast<uint64_t>(p), ActType::F32}; }
  static Act host_f16(const uint16_t* p) { return Act{reinterpret_cast<uint64_t>(p), ActType::F16}; }

 private:
  const PackedMatrix& packed(const QTensor& w);
  void matmul_reference(const QTensor& w, const float* x, int64_t m, float* y);
  void matmul_float(const QTensor& w, const float* x, int64_t m, float* y);
  void matmul_quantized(const QTensor& w, const PackedMatrix& p, const float* x, int64_t m, float* y);
  const RepackedQ8* repacked(const QTensor& w) const;
  void gemm_q8(const RepackedQ8* const* mats, float* const* ys, int count, const float* x, int64_t m);
  void gemm_q8(const RepackedQ8* const* mats, float* const* ys, int count, const float* x,
               const std::vector<int64_t>& offsets);
  int64_t rows_per_task(const QTensor& w) const;
  // ys[s][rows of expert e] = x[rows of expert e] * stacks[s].expert(e)^T for every expert, where expert e's
  // rows are [offsets[e], offsets[e+1]) of x (grouped by expert): one parallel pass over all experts' work.
  void grouped_matmul(const ExpertStack* const* stacks, float* const* ys, int count, const float* x,
                      const std::vector<int64_t>& offsets);
  void grouped_gemm_q8(const ExpertStack* const* stacks, float* const* ys, int count, const float* x,
                       const std::vector<int64_t>& offsets, std::vector<char>& left);
  // fn over the rows [0, rows) of `width` elements each: split over the pool when they hold kSplitElements or
  // more (prefill's row-wise and element-wise ops), at once on this thread otherwise (decode's, where waking
  // the pool would cost more than it saves).
  static constexpr int64_t kSplitElements = 65536;
  void split_rows(int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& fn);
  // v's storage with room for n elements, grown (never shrunk) as needed: scratch reused from call to call.
  static float* grown(std::vector<float>& v, int64_t n);
  template <typename T>
  void attention_fast(const float* q, const T* k_cache, const T* v_cache, int64_t pos0, int64_t m, int64_t n_heads,
                      int64_t n_kv_heads, int64_t head_dim, float* out);
  // attention_fast's prompts, where the ISA has scores_blocked (cpu_backend.cpp says how). False, having done
  // nothing, where that path does not apply.
  template <typename T>
  bool attention_prefill(const float* q, const T* k_cache, const T* v_cache, int64_t pos0, int64_t m, int64_t n_heads,
                         int64_t n_kv_heads, int64_t head_dim, float* out);

  CpuOptions options_;
  const CpuKernels* kernels_;
  const AttentionKernels* attn_;
  TileUnit tiles_;
  const Q8GemmKernels* gemm_;
  ActType kv_type_;
  ThreadPool pool_;
  std::mutex packed_mutex_;
  std::unordered_map<const void*, std::unique_ptr<PackedMatrix>> packed_;
  std::vector<std::unique_ptr<RepackedSet>> repacked_sets_;
  std::unordered_map<const void*, const RepackedQ8*> repacked_;  // written by prepare()/repack() only
  struct RopeTable {  // rope()'s cos and sin of the last positions it was asked for
    int64_t pos0 = -1, m = 0, head_dim = 0;
    float theta = 0.0f;
    std::vector<float> cs, sn;
  } rope_table_;
  struct MoeRows {
    std::vector<float> expanded, gate, up, down;
  } moe_rows_;  // moe()'s routed rows (cpu_moe.cpp)
  std::vector<float> widened_kv_;  // attention_prefill's blocked keys (and widened values)
};

}  // namespace qt::rt
