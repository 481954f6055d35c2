#pragma once
// Row dequantization for the CPU reference path, written from the semantics in models/core/weights.h.
#include <cstdint>

#include "models/core/weights.h"

namespace qt::rt {

// out[0..t.cols) = W[row][:] as fp32. Works for every WeightType.
void dequant_row(const QTensor& t, int64_t row, float* out);

}  // namespace qt::rt
