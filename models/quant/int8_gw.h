#pragma once
// INT8 group-wise weights in TensorRT-LLM fpA_intB semantics (plain, non-interleaved layout).
// Input w is Hugging Face [N][K] (out, in); output is in-major: q uint8 [K][N] with +128 bias,
// scales fp16 [K/G][N], and for the asymmetric variant fp16 zeros [K/G][N].
//   SYM:  s = f16(amax / 127); q = s == 0 ? 0 : clamp(rint(w / s), -127, 127); w' = (u8 - 128) * s
//   ASYM: s = f16((mx - mn) / 255); z = f16(mn + 128 * s); q = s == 0 ? 0 : clamp(rint((w - z) / s), -128, 127);
//         w' = (u8 - 128) * s + z
#include <cstdint>

namespace qt::quant {

void quantize_int8_gw(const float* w, int64_t rows, int64_t cols, int32_t group, bool asymmetric, uint8_t* q,
                      uint16_t* scales, uint16_t* zeros);

}  // namespace qt::quant
