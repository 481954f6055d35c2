#pragma once
// An owning encoded tensor: the arrays a file stores for one weight, produced from floats by the rules of
// its WeightType. The writer streams these to disk; tests and the CPU runtime can use view() directly.
#include <cstdint>
#include <vector>

#include "models/core/weights.h"

namespace qt::quant {

struct QuantizedTensor {
  WeightType type = WeightType::F32;
  int64_t rows = 0, cols = 0;
  int32_t group_size = 0;
  std::vector<uint8_t> values;    // F32/F16/BF16 raw bytes; Q8_0 int8 q; INT8_GW u8 q [K][N]
  std::vector<float> scales_f32;  // Q8_0
  std::vector<uint16_t> scales_f16, zeros_f16;  // INT8_GW_*, AWQ_INT4
  std::vector<int32_t> qweight, qzeros;         // AWQ_INT4

  // The storage of one of the type's arrays (weight_traits(type).arrays): `values` holds Values and Q.
  const void* array(WeightArray a) const;
  // A view over this object's arrays; valid while it lives and is not modified.
  QTensor view() const;
};

// Encodes w ([rows][cols], Hugging Face [out][in]) as `type` with group `group_size` (ignored for
// F32/F16/BF16). Throws qt::Error if the shape does not fit the type's rules.
QuantizedTensor quantize_tensor(const float* w, int64_t rows, int64_t cols, WeightType type, int32_t group_size);

}  // namespace qt::quant
