#include "models/quant/q8_0.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "models/core/weight_traits.h"
#include "models/quant/rounding.h"

namespace qt::quant {

int32_t q8_0_group_rule(int64_t dim) { return default_group_dividing(WeightType::Q8_0, {dim}); }

void quantize_q8_0(const float* w, int64_t count, int32_t group, int8_t* q, float* scales) {
  if (group <= 0 || count % group != 0) {
    throw Error("quantize_q8_0: group size " + std::to_string(group) + " does not divide " + std::to_string(count),
                kExitFailure);
  }
  for (int64_t g0 = 0; g0 < count; g0 += group) {
    float amax = 0.0f;
    for (int64_t i = g0; i < g0 + group; ++i) amax = std::fmax(amax, std::fabs(w[i]));
    const float scale = amax / 127.0f;
    scales[g0 / group] = scale;
    for (int64_t i = g0; i < g0 + group; ++i) {
      // The clamp only matters when amax is subnormal and the division loses precision.
      q[i] = scale == 0.0f ? int8_t{0} : static_cast<int8_t>(rint_clamp(w[i] / scale, -127.0f, 127.0f));
    }
  }
}

}  // namespace qt::quant
