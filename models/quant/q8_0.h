#pragma once
// qwen3.c Q8_0: symmetric int8 with one fp32 scale per `group` consecutive elements of the flattened
// row-major tensor. scale = amax / 127; q = scale == 0 ? 0 : rint(w / scale).
#include <cstdint>

namespace qt::quant {

// qwen3.c's export rule: 64, halved while `dim % group != 0`.
int32_t q8_0_group_rule(int64_t dim);

// Quantizes `count` values (count % group == 0): q[count], scales[count / group].
void quantize_q8_0(const float* w, int64_t count, int32_t group, int8_t* q, float* scales);

}  // namespace qt::quant
