#pragma once
// The device backend's end-to-end checks, written once and run on the emulator (label gpu-backend) and on a
// CUDA GPU (label gpu). Each compares the device backend (fp16 activations, kernel families) with the CPU
// reference path (fp32, dequantized weights, double accumulation) on the transformers golden model files.
#include <functional>
#include <memory>
#include <string>

#include "device/api/device.h"
#include "device/blas/blas_lt.h"
#include "device/winners/winners.h"
#include "kernels_src/registry/family.h"
#include "runtime/gpu/device_weights.h"

namespace qt::test {

using DeviceFactory = std::function<std::unique_ptr<dev::Device>()>;
// A tuning store for the device (its families named under `store_prefix`) whose batch dispatch ranks the
// cuBLASLt baseline first at every bucket of each of the given linear shapes.
using BaselineStore = std::function<std::shared_ptr<const winners::WinnersTable>(
    dev::Device&, const std::string& store_prefix, const blas::Baseline&, const std::vector<kernels::Shape>&)>;

// Golden dense files: dense and dense-tied in ajc1 (Q8_0) and ak48 (AWQ, fp16 embedding and lm_head); golden
// MoE files: moe-norm.{q8_0,int8-sym,int8-asym,awq}.moe3 and moe-nonorm.q8_0.moe3. `trtllm` puts INT8 experts
// in TensorRT-LLM's preprocessed layout on the device.
void check_golden_logits(const DeviceFactory& make, const std::string& file, bool trtllm = false);
// A golden MoE file with its experts in the frag layout (DeviceBackendOptions::frag_experts; the device must
// be sm_90): the CPU reference's logits, every grouped GEMM run by a Hopper frag family.
void check_frag_experts(const DeviceFactory& make, const std::string& file);
// Every sequence of the transformers goldens (tests/golden/manifest.json) of each golden MoE file, on the
// device: logits within the fp16 tolerance of transformers' and the same top-1 at every position.
void check_moe_transformers_goldens(const DeviceFactory& make, bool trtllm = false);
// The dense projections (AWQ or Q8_0) stored in the frag layout (the default) and in the file layout: each run
// gives the CPU reference's logits, through the linear.frag families exactly when the frag layout is on (the
// lm_head keeps the file layout either way).
void check_weight_layouts(const DeviceFactory& make, const std::string& file);
void check_greedy_tokens(const DeviceFactory& make, const std::string& file);
// Gate, up and SwiGLU as one launch per layer at M <= 16 where the frag layout stores [w1; w3] (`fused`), else
// apart; the same tokens and logits either way.
void check_concatenated_gate_up(const DeviceFactory& make, const std::string& file, bool fused);
// With fuse_norm, each decode step of a model whose attention projections the frag stream GEMVs serve (`fused`)
// runs no norm launch but the final one and a MoE block's own, every model's attention runs q/k norm + RoPE + the
// KV write in its own launch, and the CPU reference's tokens come out.
void check_fused_norm(const DeviceFactory& make, const std::string& file, bool fused);
// A synthetic Qwen3-MoE model (tiny-moe, 128 wide, 4 query and 2 KV heads of 32) whose q, k and v the frag layout
// stores as one, written once per process to a temporary file: the golden MoE models' 48-wide KV heads are not
// whole frag tiles. Its path.
std::string write_fusable_moe_model();
// With fuse_norm and the experts in the frag layout, each decode step's MoE block runs its experts as the two
// routed GEMVs (kernels_src/moe_stream) on the router's logits: no gating, block alignment, split-K reduction
// or finalize launch, exactly the gating, the grouped plans' launches and the finalize fewer, and the CPU
// reference's tokens.
void check_moe_stream(const DeviceFactory& make, const std::string& file);
// q, k and v stored once as their concatenation (the default) against three tensors: the CPU reference's greedy
// tokens and decode logits either way; each decode step's layer one launch for the three, so two launches
// fewer per layer and step; no more device memory. `concatenated`: whether the file's q/k/v can be stored so
// on the device (else every group runs one by one, visibly). `storage`: the dense projections' (kFrag the
// default, kFile qrun --weight-layout file, kF16 qrun --predequantize).
void check_concatenated_qkv(const DeviceFactory& make, const std::string& file, bool concatenated,
                            rt::DeviceWeights::Storage storage = rt::DeviceWeights::Storage::kFrag);
// The file's k projection replaced by an fp32 copy, so q, k and v no longer share a type: no concatenated
// shape in the tuner's list, three tensors and three launches on the device, the CPU reference's tokens.
void check_qkv_types_differ(const DeviceFactory& make, const std::string& file);
// --predequantize: the dense weights dequantized to fp16 at load give the CPU reference's logits; with `blas`
// (a GPU) the prompt's GEMMs run on cuBLASLt and decode still gives the reference's greedy tokens.
void check_predequantized(const DeviceFactory& make, const std::string& file, bool blas);
// Without a tuned store, cuBLASLt at hand: a prompt of blas::kDequantBlasRows rows and more runs the quantized
// projections on dequant + cuBLASLt (blas::default_route) with the CPU reference's logits; decode stays on the
// GEMV families.
void check_default_route(const DeviceFactory& make, const std::string& file);
// A dispatch (from `store`) ranking the dequant + cuBLASLt `baseline` (its store name without the device
// prefix) first (a GPU): the model's linears of its type run on it, held in the layout it reads, and give the
// CPU reference's logits and greedy tokens.
void check_baseline_dispatch(const DeviceFactory& make, const std::string& file, const std::string& baseline,
                             const BaselineStore& store);
// A 24-token prompt in one step: its logits come back in two passes of the logits buffer, every row intact.
void check_prompt_logits_one_step(const DeviceFactory& make, const std::string& file);
void check_multi_turn(const DeviceFactory& make, const std::string& file);
void check_long_prompt(const DeviceFactory& make, const std::string& file);
void check_full_context(const DeviceFactory& make, const std::string& file);

}  // namespace qt::test
