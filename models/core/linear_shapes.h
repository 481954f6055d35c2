#pragma once
// Every distinct linear shape a model runs, written once: the families that serve linear layers (AWQ, frag,
// Q8_0, fp16 GEMV and GEMM, the fused gate/up) and the tuner take their shapes from here.
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
  std::string label;     // the projections of this (n, k, group, type), "wq+wo"
  bool expert = false;   // a MoE expert projection
  int64_t max_rows = 0;  // the most rows the runtime runs it at (the lm_head: kLogitRowsPerPass); 0 = any
};

// With weights: the first layer's projections (every layer has the same), its experts, and the lm_head, each
// with its stored type and group; tensors of one (n, k, group, type) share an entry. With only a config:
// every projection (the router and the experts for a MoE model, the dense MLP otherwise) and the lm_head, type
// unknown.
std::vector<LinearShape> model_linear_shapes(const ModelConfig& c, const ModelWeights* w);

}  // namespace qt
