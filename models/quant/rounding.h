#pragma once
// The rounding primitive every quantizer shares: round half to even in the default FP environment, then
// clamp while still in float so a NaN, an infinity or a subnormal-scale overshoot can never reach an
// out-of-range float-to-int conversion (undefined behaviour).
#include <cmath>

namespace qt::quant {

inline float rint_clamp(float x, float lo, float hi) {
  const float r = std::rint(x);
  return std::fmin(std::fmax(r, lo), hi);  // fmax(NaN, lo) == lo
}

}  // namespace qt::quant
