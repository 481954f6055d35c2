#pragma once
// The launches of one whole forward step (a decode token, or a prefill of N tokens) as the device runtime
// issues them, derived from the model's shapes (models/core/linear_shapes.h) and the kernel registry, so the
// static model can predict a step without linking the runtime (tuner/ never links runtime/).
//
// This mirrors runtime/gpu/device_backend.cpp, device_moe.cpp and runtime/model/qwen3_model.cpp (run_chunk):
// the order of ops, the concatenated q/k/v at one row, the fused gate/up + SwiGLU GEMV over the frag layout at
// M <= 16 (the file-layout fused GEMV at M <= 8), cuBLASLt for fp16 weights above the GEMV rows, flash-decoding
// at the context, prefill in chunks of 256 tokens with the lm_head only on the last row. What a launch runs is
// left to the predictor (step_predict.h), which chooses families from the registry as kernel_choice.cpp does.
// When the runtime changes how it issues a step, this list changes with it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"
#include "models/core/model_config.h"
#include "models/core/weights.h"
#include "models/core/weight_traits.h"

namespace qt::tune {

// How each role's weights are stored: a model file's types, or a preset's as its format writes them.
struct StepWeights {
  WeightType dense = WeightType::AWQ_INT4;  // attention and dense-MLP projections
  int64_t dense_group = 128;
  WeightType embedding = WeightType::F16;
  int64_t embedding_group = 0;
  WeightType head = WeightType::F16;  // the lm_head (the embedding where tied)
  int64_t head_group = 0;
  WeightType router = WeightType::Q8_0;  // MoE only
  int64_t router_group = 0;
  WeightType expert = WeightType::AWQ_INT4;  // MoE only
  int64_t expert_group = 128;
};

// A model file's own types: its first layer's (every layer has the same), its embedding and lm_head.
StepWeights step_weights(const ModelWeights& w);

// The runtime's options that change the launch list (DeviceBackendOptions of the same names).
struct StepRuntime {
  bool frag_layout = true;      // quantized dense weights repacked into the frag layout at load
  bool predequantize = false;   // every dense weight and the lm_head held as fp16 (GEMMs on cuBLASLt)
  bool prefill_f16 = false;     // frag-layout dense weights with an fp16 copy beside, for the GEMMs of a prefill
  bool concatenate_qkv = true;  // q/k/v as one linear at one row
  bool concatenate_gate_up = true;  // gate/up as one fused frag GEMV at M <= 16
  bool fuse_norm = false;  // a decode step's norms inside the stream GEMVs beside them (qrun --fuse-norm)
  bool trtllm_int8 = false;
  bool frag_experts = false;  // MoE experts in the frag layout, on the wgmma grouped GEMMs (ops moe_*.frag)
  bool blas = true;  // cuBLASLt at hand, as on every GPU: blas::default_route sends some linears to it
  // Quantized weights from blas::kDequantBlasRows rows on dequant + cuBLASLt, as blas::default_route says; false
  // models the runtime before 2026-11-27 (the H200 runs' commits), which kept them on the GEMM families.
  bool dequant_blas = true;
  // Prompt tokens per prefill chunk; 0: as the runtime picks (blas::prefill_chunk). The H200 runs' commits ran 256.
  int64_t prefill_chunk = 0;
  // The stream GEMVs' untuned defaults on their register ring (ring = 0): the runtime before 30 Nov, which the
  // H200 runs ran; false: the shared ring the defaults run since.
  bool register_ring = false;
  // The frag GEMVs before the stream GEMVs in the untuned preference at M <= 16: the registry's order before
  // 1 Dec, which every H200 run ran (q|k|v, o_proj and down_proj on awq_frag_gemv); false: the stream GEMVs first.
  bool gemv_first = false;
};

struct StepSpec {
  ModelConfig config;
  StepWeights weights;
  StepRuntime runtime;
  bool decode = true;
  int64_t context = 0;  // decode: tokens already in the KV cache; prefill: tokens of the prompt
};

// One op the runtime issues (a kernel family's op, or cuBLASLt), `count` times per step with the same shape.
struct StepLaunch {
  std::string op;                   // "linear.frag", "attention_decode", ...; "cublaslt" for fp16 GEMMs
  std::optional<WeightType> type;   // the weight type it is dispatched on, where it has one
  kernels::Shape shape;             // the shape the runtime passes (its dims in the op's families' order)
  kernels::Shape choice_shape;      // the shape the runtime chooses by (attention: the context bucket)
  std::string what;                 // "q|k|v", "attn norm", ...
  int64_t count = 1;
};

std::vector<StepLaunch> step_launches(const StepSpec& spec);

// Bytes one step must read at the least: every weight it multiplies once (the experts a token routes to) and
// the KV cache up to the context. The roofline's numerator.
struct StepBytes {
  double weights = 0, kv = 0;
};
StepBytes step_min_bytes(const StepSpec& spec);


}  // namespace qt::tune
