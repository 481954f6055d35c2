#pragma once
// Row dequantization for the CPU reference path: the runtime's name for the one reference definition,
// qt::dequantize_row (models/core, through weight_traits), so the backend and the kernels' checks agree.
#include <cstdint>

#include "models/core/weights.h"

namespace qt::rt {

// out[0..t.cols) = W[row][:] as fp32. Works for every WeightType.
inline void dequant_row(const QTensor& t, int64_t row, float* out) { dequantize_row(t, row, out); }

}  // namespace qt::rt
