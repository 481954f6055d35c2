#pragma once
// The runtime's ops on a dev::Device (the CPU emulator or a CUDA GPU): activations and the KV cache are fp16
// device memory, weights are uploaded once in prepare(), and every op is a kernel family of kernels_src/ at
// the point the tuning store chose for this device and shape (else the nearest tuned shape's, else the
// family default; see kernel_choice.h). A forward step is queued and, for decode steps whose launches repeat,
// replayed as a captured graph; only sampled tokens, or logits when asked, come back to the host. A layer's q, k
// and v weights are stored once, concatenated, where their types and the layout allow, so that a decode step
// runs the three projections as one launch.
// Dense Qwen3 and Qwen3-MoE models run here; a MoE block is routed, grouped and finalized on the device
// (device_moe.cpp), so MoE decode steps are captured and replayed like dense ones.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/progress.h"
#include "device/api/device.h"
#include "device/blas/blas_lt.h"
#include "device/winners/winners.h"
#include "runtime/core/backend.h"
#include "runtime/gpu/device_weights.h"
#include "runtime/gpu/family_launcher.h"
#include "runtime/gpu/kernel_choice.h"
#include "runtime/gpu/launch_queue.h"

namespace qt::rt {

// The cuBLASLt baseline (device/blas/blas_lt.h's table) a store name of the device with that prefix names
// ("cuda.q8_0_dequant_cublaslt" under "cuda."), or null: the contenders of a stored dispatch this backend runs.
const blas::Baseline* store_baseline(std::string_view store_name, std::string_view store_prefix);
// Why the baseline cannot multiply the device weight ("" when it can): a weight of another type, or held in
// another layout (file or frag) than the one the baseline's dequant reads.
std::string baseline_refusal(const blas::Baseline& baseline, const DeviceTensor& w);
// Lets `chooser` return the cuBLASLt baselines a stored dispatch ranks (those store_baseline names under
// `store_prefix`) as external choices, as a backend with cuBLASLt runs them.
void accept_store_baselines(KernelChooser& chooser, const std::string& store_prefix);

struct DeviceBackendOptions {
  // May be null. Looked up under the device's own store_fingerprint(), the identity qtune stored it under.
  std::shared_ptr<const winners::WinnersTable> tuned;
  std::string store_prefix;  // "emu." or "cuda."
  bool graphs = true;                                  // capture and replay decode steps
  // Every launch of every step timed between two events, no graph captured (LaunchQueue::time_launches): what
  // qrun --launch-times writes.
  bool time_launches = false;
  bool trtllm_int8 = false;  // INT8 group-wise experts in TensorRT-LLM's preprocessed layout (ops *.trtllm)
  // Dense AWQ INT4, INT8_GW_SYM and Q8_0 projections in the frag layout, repacked on the device at load time
  // and run by the op "linear.frag" families; false keeps the file layout and the op "linear" families.
  bool frag_layout = true;
  // MoE experts of the types the frag layout holds repacked into it at load, and run by the grouped GEMMs on
  // Hopper's wgmma (ops moe_gate_up.frag / moe_down.frag, sm_90a: prepare() refuses another device when asked).
  // Unset: moe_wgmma::frag_experts_by_default(arch), the frag layout on sm_90 (measured faster there).
  std::optional<bool> frag_experts;
  // Dense linear weights dequantized to fp16 once at load (MoE experts and the embedding table stay quantized);
  // their GEMMs go to cuBLASLt (`blas`, when given) or to the fp16 families, as DeviceBackend::linear decides. With
  // `blas`, a stored dispatch that ranks a cuBLASLt baseline first in a bucket is followed too.
  bool predequantize = false;
  // Dense projections held in the frag layout and, beside it, dequantized once to fp16 (DeviceWeights::kFragF16):
  // from blas::kF16CopyRows rows (a prefill) their GEMMs run on the fp16 copy (cuBLASLt, or the fp16 families
  // without it) with no dequant per call, decode's GEMVs on the quantized weights. The memory of both.
  bool prefill_f16 = false;
  // q, k and v of a layer stored once as their concatenation where models/core/linear_shapes.h allows it and
  // the storage can (DeviceWeights::add_concatenated), and run as one linear at one row; false keeps three.
  bool concatenate_qkv = true;
  // The dense MLP's gate and up stored as one frag matrix, run at decode as one GEMV with SwiGLU in its epilogue.
  bool concatenate_gate_up = true;
  // A decode step's norms fused into the kernels beside them: the RMSNorms into the frag stream GEMVs
  // (fuses_norm: q|k|v and gate|up normalize the hidden state as they read it, o_proj and down_proj add their
  // outputs to it), and q/k norm + RoPE + the KV write into attention decode (rope_attention). Off by default:
  // a GPU's measurement decides (qbench --choose-decode, or qrun's trial of its first decode steps, decode_trial.h).
  bool fuse_norm = false;
  std::shared_ptr<blas::BlasLt> blas;
  // A weight load or a forward step that runs longer than this shows a progress line on stderr: on the
  // emulator a large model's step takes minutes. Shorter work prints nothing.
  double progress_after_seconds = 5;
};

class DeviceBackend final : public Backend {
 public:
  DeviceBackend(dev::Device& device, DeviceBackendOptions options);
  ~DeviceBackend() override;

  std::string name() const override;
  ActType act_type() const override { return ActType::F16; }
  void prepare(const ModelWeights& weights) override;
  std::unique_ptr<DeviceBuffer> alloc(size_t elements) override;
  void upload(const float* host, size_t n, Act dst) override;
  void download(Act src, size_t n, float* host) override;

  void embed(const QTensor& table, const int32_t* tokens, int64_t m, Act out) override;
  void matmul(const QTensor& w, Act x, int64_t m, Act y, MatmulMode mode = MatmulMode::kDefault) override;
  void matmul_group(const MatmulJob* jobs, int count, Act x, int64_t m) override;
  void gate_up_swiglu(const QTensor& gate, const QTensor& up_w, Act x, int64_t m, Act h, Act up) override;
  void add_rmsnorm(Act x, Act residual, const float* weight, int64_t rows, int64_t n, float eps, Act y) override;
  bool fuses_norm(const LayerWeights& layer, int64_t m) const override;
  void rmsnorm_matmul_group(Act x, const float* weight, float eps, const MatmulJob* jobs, int count, int64_t m,
                            Act xn) override;
  void rmsnorm_gate_up_swiglu(Act x, const float* weight, float eps, const QTensor& gate, const QTensor& up_w, int64_t m,
                              Act h, Act up, Act xn) override;
  void matmul_residual(const QTensor& w, Act a, int64_t m, Act x, Act y) override;
  void matmul_residual_rmsnorm(const QTensor& w, Act a, int64_t m, Act x, Act y, const float* weight, float eps,
                               Act xn) override;
  void moe_residual(const MoeBlock& block, Act xn, int64_t m, Act x, Act y) override;  // device_moe.cpp
  void qk_norm_rope_kv(const QkRopeKv& s) override;
  void rope_attention(const QkRopeKv& s, Act out) override;
  void attention(Act q, Act k_cache, Act v_cache, int64_t capacity, int64_t pos0, int64_t m, int64_t n_heads,
                 int64_t n_kv_heads, int64_t head_dim, Act out) override;
  void silu_mul(Act gate, Act up, int64_t n) override;
  void add(Act y, Act x, int64_t n) override;
  void argmax(Act logits, int64_t m, int64_t vocab, int32_t* tokens) override;
  void moe(const MoeBlock& block, Act x, int64_t m, Act out) override;  // device_moe.cpp
  void begin_step(const int32_t* tokens, int64_t m, int64_t pos0) override;
  int64_t prefill_chunk() const override;
  void end_step() override;

  const KernelChooser& chooser() const { return chooser_; }
  const DeviceBackendOptions& options() const { return options_; }
  // Between steps: the next decode steps run with their norms fused or not (DeviceBackendOptions::fuse_norm), and
  // launch and capture their graph anew, so that a launch attribute changed beside it (PDL) is captured too.
  void set_fuse_norm(bool on);
  const LaunchQueue::Stats& launch_stats() const { return queue_.stats(); }
  const std::vector<LaunchQueue::TimedStep>& timed_steps() const { return queue_.timed_steps(); }
  size_t timed_steps_dropped() const { return queue_.timed_steps_dropped(); }
  // Linear calls that went to cuBLASLt and to the fp16 families (predequantized weights only).
  struct BlasCounts {
    int64_t blas = 0, families = 0;
    int64_t f16_copy = 0;  // linear calls of quantized weights run on their fp16 copy (prefill_f16)
  };
  const BlasCounts& blas_counts() const { return blas_counts_; }
  uint64_t weight_bytes() const { return weights_.bytes(); }
  // matmul_group calls run as one linear over the concatenated weights, and run one linear per job.
  struct GroupCounts {
    int64_t concatenated = 0, separate = 0;
    int64_t gate_up_fused = 0;  // gate_up_swiglu calls run as the one frag GEMV over [gate | up]
    int64_t norm_fused = 0, residual_fused = 0;  // the fused norms' GEMVs (fuse_norm)
    int64_t residual_norm = 0;  // of the residual GEMVs, those that wrote the next norm too (o_proj before a MoE block)
    int64_t rope_fused = 0;  // attention decodes that ran q/k norm, RoPE and the KV write (fuse_norm)
    int64_t moe_residual = 0;  // MoE finalizes that added into the hidden state (fuse_norm)
    int64_t moe_stream = 0;    // of those, MoE blocks run as the two routed GEMVs (kernels_src/moe_stream)
  };
  const GroupCounts& group_counts() const { return group_counts_; }

 private:
  void run(const std::string& op, const WeightType* type, const kernels::Shape& shape, const Bindings& b);
  void bind_split_locks(Bindings& b, int64_t rows, int64_t m);
  void bind_counters(Bindings& b, int64_t count);
  // Attention's buffers (q, the caches, pos, out; the split counters at one query) and the shape it is chosen by.
  kernels::Shape bind_attention(Bindings& b, Act q, Act k_cache, Act v_cache, int64_t capacity, int64_t pos0,
                                int64_t m, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, Act out);
  void linear(const DeviceTensor& w, Act x, int64_t m, Act y);
  // The MoE block into `out`, or added to it in place (`residual`, moe_finalize_residual).
  void moe_block(const MoeBlock& block, Act x, int64_t m, Act out, bool residual);
  // The experts of moe_block's decode path with the norms fused, frag layout: the routed GEMVs after the gating.
  void moe_stream(const DeviceTensor& gate, const DeviceTensor& up, const DeviceTensor& down, Act x, int64_t m,
                  int64_t top_k, Act out, const kernels::Shape& front, const kernels::Shape& back);
  // The concatenation of the jobs' weights where one linear at `m` rows can write every job's output (outputs back
  // to back in the jobs' order, at one row); null where not.
  const DeviceTensor* concatenated_jobs(const MatmulJob* jobs, int count, int64_t m) const;
  void fused_stream(const std::string& op, const std::string& base_op, const DeviceTensor& w, const kernels::Shape& shape,
                    Act x, const char* out_name, Act out, int64_t out_elements, const float* norm, float eps,
                    Act yn = Act{});
  void linear_external(const KernelChoice& c, const DeviceTensor& w, Act x, int64_t m, Act y, const kernels::Shape& shape);
  void linear_baseline(const blas::Baseline& row, int rank, const DeviceTensor& w, Act x, int64_t m, Act y,
                       const kernels::Shape& shape);
  void queue_blas(dev::DevPtr w, blas::WeightLayout layout, Act x, int64_t m, int64_t n, int64_t k, Act y, int rank);
  int blas_rank(const std::string& store_name, const std::string& dtypes, const kernels::Shape& shape) const;
  dev::DevPtr scratch(size_t bytes);
  void grow(dev::Buffer& b, size_t need, size_t bytes);  // at least `need` bytes; `bytes` when it reallocates
  void check_step_position(const char* op, int64_t pos0) const;
  void check_cache_rows(const char* op, const QkRopeKv& s) const;
  void stage_tokens(const int32_t* tokens, int64_t m);
  std::string progress_label(const std::string& what) const;
  struct WeightVisitor {
    std::function<void(const QTensor&, DeviceWeights::Storage)> tensor;
    // Projections that may be stored as one concatenation: false where they are not, and `tensor` then
    // visits each.
    std::function<bool(std::span<const QTensor* const>, DeviceWeights::Storage)> concatenation;
    std::function<void(const ExpertStack&)> stack;
    std::function<void(const std::vector<float>&)> vector;
    std::function<void(size_t layers)> layer_done;
  };
  void visit_weights(const ModelWeights& w, const WeightVisitor& v) const;

  dev::Device& device_;
  DeviceBackendOptions options_;
  KernelChooser chooser_;
  LaunchQueue queue_;
  FamilyLauncher launcher_;
  DeviceWeights weights_;
  dev::Buffer tokens_, pos_, argmax_, scratch_;
  dev::Buffer dequantized_;  // fp16 weights on their way to cuBLASLt (a dequant + cuBLASLt baseline)
  dev::Buffer locks_;  // split-K tile counters of the linear.frag families: zero between launches
  struct MoeBuffers {
    dev::Buffer logits, ids, weights, h, y, rows;  // rows: the identity map finalize reads y through
    int64_t rows_filled = 0;
  } moe_;
  BlasCounts blas_counts_;
  GroupCounts group_counts_;
  std::vector<dev::Buffer> retired_;  // outgrown buffers queued launches may still name
  const int32_t* staged_tokens_ = nullptr;  // the step's host tokens, already on the device
  int64_t step_pos0_ = -1;
  std::optional<Progress> step_progress_;  // of the step begun, shown only when it runs long
  bool in_step_ = false;
  bool step_replayable_ = false;  // a decode step: its launches may be captured and replayed
  struct PendingDownload {
    Act src;
    size_t n;
    float* host;
  };
  struct PendingTokens {
    int64_t m;
    int32_t* host;
  };
  std::vector<PendingDownload> downloads_;
  std::vector<PendingTokens> token_outputs_;
};

}  // namespace qt::rt
