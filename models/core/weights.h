#pragma once
// Typed, non-owning views of a model's weights. A reader builds these over its memory map; the runtime,
// the kernels' CPU references and the converters consume them. Nothing here copies weight data.
//
// Every matrix is a linear map y = W x with W logically [rows = out_features N, cols = in_features K]
// (Hugging Face's [out, in]). How the bytes are laid out depends on the type:
//
//   F32, F16, BF16   values row-major [N][K].
//   Q8_0             qwen3.c: `q` int8 row-major [N][K]; `scales_f32` [N*K / G], one per G consecutive
//                    elements of the flattened tensor (G divides K). w = q * scale.
//   INT8_GW_SYM      TensorRT-LLM fpA_intB semantics, plain (not interleaved) layout: `q` uint8 [K][N]
//                    (in-major, like AWQ), stored with +128 bias; `scales_f16` [K/G][N].
//                    w[n][k] = (q[k][n] - 128) * s[k/G][n].
//   INT8_GW_ASYM     as INT8_GW_SYM plus `zeros_f16` [K/G][N], an additive fp16 offset (TensorRT-LLM's
//                    FINEGRAINED_SCALE_AND_ZEROS): w[n][k] = (q[k][n] - 128) * s[k/G][n] + z[k/G][n].
//   AWQ_INT4         AutoAWQ GEMM packing: `qweight` int32 [K][N/8], `qzeros` int32 [K/G][N/8], `scales_f16`
//                    [K/G][N]. Element n = 8j+e of word j is nibble kAwqOrder[e] (weight_traits.h).
//                    w[n][k] = (q[k][n] - z[k/G][n]) * s[k/G][n].
//
// All scale arithmetic is fp32 after widening the stored value (fp16 -> fp32 exactly).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/core/model_config.h"
#include "models/core/weight_traits.h"

namespace qt {

const char* weight_type_name(WeightType t);  // weight_traits(t).name; "unknown" outside the enum

struct QTensor {
  WeightType type = WeightType::F32;
  int64_t rows = 0;  // N, out features
  int64_t cols = 0;  // K, in features
  int32_t group_size = 0;  // G; 0 for unquantized types
  const void* data = nullptr;            // F32/F16/BF16 values, Q8_0 int8 q, INT8_GW uint8 q, AWQ qweight
  const float* scales_f32 = nullptr;     // Q8_0
  const uint16_t* scales_f16 = nullptr;  // INT8_GW_*, AWQ_INT4 (fp16 bits)
  const uint16_t* zeros_f16 = nullptr;   // INT8_GW_ASYM (fp16 bits)
  const int32_t* qzeros = nullptr;       // AWQ_INT4

  bool empty() const { return data == nullptr; }
  // Bytes this view's arrays occupy in the file (for roofline accounting).
  uint64_t storage_bytes() const;
  // Points the member that holds `array` of this type's weights at `p` (scales go to scales_f32 or
  // scales_f16 by the type's scale kind).
  void set_array(WeightArray array, const void* p);
  const void* array(WeightArray a) const;  // the member set_array(a, ...) sets
  // Bytes of one of this type's arrays for this tensor's size and group.
  uint64_t array_bytes(const ArraySpec& spec) const;
};

// Plain reference dequantization (weight_traits' functions), the definition every kernel is checked against.
float dequant_element(const QTensor& t, int64_t row, int64_t col);
void dequantize_row(const QTensor& t, int64_t row, float* out);  // out[cols]
std::vector<float> dequantize(const QTensor& t);                  // [rows][cols]

// The E experts of one MoE projection in one layer, one [E][N][K] tensor: `base` views expert 0 and each of
// its type's arrays (array_specs() order) continues `stride[i]` bytes further per expert. moe3 stores Q8_0
// experts as consecutive tensors and the other types array by array, so strides differ by type, but within
// a stack they are regular: a kernel reaches expert e by address arithmetic alone.
struct ExpertStack {
  QTensor base;
  int64_t experts = 0;
  std::array<uint64_t, 4> stride{};

  bool empty() const { return experts == 0; }
  QTensor expert(int64_t e) const;  // expert e's view (throws qt::Error outside [0, experts))
  uint64_t storage_bytes() const { return base.storage_bytes() * uint64_t(experts); }
};

// The stack of `experts` (all of one type and shape, in order), or a qt::Error naming `what` when they differ
// or their arrays are not evenly spaced in memory.
ExpertStack stack_experts(const std::vector<QTensor>& experts, const std::string& what);

struct LayerWeights {
  std::vector<float> attn_norm;  // input_layernorm [dim]; norms are widened to fp32 whatever the file holds
  std::vector<float> ffn_norm;   // post_attention_layernorm [dim]
  std::vector<float> q_norm;     // [head_dim]
  std::vector<float> k_norm;     // [head_dim]
  QTensor wq, wk, wv, wo;        // q_proj [q_dim, dim], k/v_proj [kv_dim, dim], o_proj [dim, q_dim]
  QTensor w1, w2, w3;            // dense: gate_proj [hidden, dim], down_proj [dim, hidden], up_proj [hidden, dim]
  QTensor router;                // MoE: mlp.gate [num_experts, dim]
  ExpertStack expert_w1, expert_w2, expert_w3;  // MoE: [E] x the shapes of w1/w2/w3
};

struct ModelWeights {
  ModelConfig config;
  QTensor embedding;   // [vocab_size, dim]
  QTensor classifier;  // lm_head [vocab_size, dim]; the same view as `embedding` when shared_classifier
  std::vector<float> final_norm;  // [dim]
  std::vector<LayerWeights> layers;
};

}  // namespace qt
