#pragma once
// Every distinct linear shape a model runs, written once: the families that serve linear layers (AWQ, frag,
// Q8_0, fp16 GEMV and GEMM, the fused gate/up) and the tuner take their shapes from here. So is the rule of
// which projections a runtime runs as one linear over their concatenated weights (qkv_concatenable), so that
// the tuner tunes the shape the runtime runs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/core/model_config.h"
#include "models/core/weights.h"

namespace qt {

struct LinearShape {
  int64_t n = 0, k = 0;  // output features, input features
  int64_t group = 0;     // the tensor's quantization group (the config's where only a config is known)
  std::optional<WeightType> type;  // as stored in the file; unknown with only a config
  std::string label;     // the projections of this (n, k, group, type), "wq+wo"; "wq|wk|wv" for their concatenation
  bool expert = false;   // a MoE expert projection
  int64_t max_rows = 0;  // the most rows the runtime runs it at (the lm_head: kLogitRowsPerPass); 0 = any
};

// q, k and v read the same input, so a decode step may run them as one linear over [wq; wk; wv] (N = q_dim +
// 2 kv_dim): one launch instead of three small ones. Only at one row: there [q | k | v] is one output row, while
// at more rows the three outputs' rows would interleave (and each projection is then a large launch anyway).
inline constexpr int64_t kConcatenatedQkvMaxRows = 1;
// The three can be concatenated when one type, one group and one K serve them all. A runtime's storage may add
// its own condition (the device's frag layout: whole 64-column tiles) and run them one by one where it fails.
bool qkv_concatenable(const QTensor& q, const QTensor& k, const QTensor& v);
// The dense MLP's gate (w1) and up (w3) read the same input too: a decode step may run them as one GEMV over
// [w1; w3] with SwiGLU in its epilogue, up to this many rows (the fused GEMV's M <= 16). They share a shape, so
// the linear shapes' "w1" entry is the fused GEMV's shape as well.
inline constexpr int64_t kConcatenatedGateUpMaxRows = 16;
bool gate_up_concatenable(const QTensor& gate, const QTensor& up);

// With weights: the first layer's projections (every layer has the same), its experts, and the lm_head, each
// with its stored type and group; tensors of one (n, k, group, type) share an entry; the concatenated q/k/v
// where qkv_concatenable. With only a config: every projection (the router and the experts for a MoE model,
// the dense MLP otherwise), the concatenated q/k/v and the lm_head, type unknown.
std::vector<LinearShape> model_linear_shapes(const ModelConfig& c, const ModelWeights* w);

}  // namespace qt
