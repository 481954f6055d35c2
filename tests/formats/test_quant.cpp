// The quantizers against hand-computed values and the rules of the brief; AWQ nibble order against
// hand-packed words.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "models/core/weights.h"
#include "models/quant/awq_int4.h"
#include "models/quant/int8_gw.h"
#include "models/quant/q8_0.h"
#include "models/quant/quantized_tensor.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

TEST_CASE("Q8_0: scale = amax / 127, q rounds half to even, an all-zero group has scale 0", "[formats]") {
  // Group 1: amax 127 -> scale 1; 2.5 -> 2 and 0.5 -> 0 (ties to even), -3.5 -> -4.
  // Group 2: all zero.
  const std::vector<float> w = {127.0f, 2.5f, 0.5f, -3.5f, 0, 0, 0, 0};
  int8_t q[8];
  float s[2];
  quant::quantize_q8_0(w.data(), 8, 4, q, s);
  CHECK(s[0] == 1.0f);
  CHECK(s[1] == 0.0f);
  const int8_t want[8] = {127, 2, 0, -4, 0, 0, 0, 0};
  CHECK(std::memcmp(q, want, 8) == 0);
  // A negative extreme maps to -127, never -128.
  const std::vector<float> neg = {-2.0f, 1.0f};
  quant::quantize_q8_0(neg.data(), 2, 2, q, s);
  CHECK(q[0] == -127);
  CHECK(q[1] == static_cast<int8_t>(std::nearbyint(1.0f / (2.0f / 127.0f))));
}

TEST_CASE("INT8_GW_SYM: fp16 scale per column and group, +128 bias, in-major [K][N] storage", "[formats]") {
  // N = 2 columns, K = 4, G = 2.
  const std::vector<float> w = {1.0f, -0.5f, 0.25f, 0.0f,    // row n = 0
                                -2.0f, 2.0f, 0.0f, 0.0f};    // row n = 1 (second group all zero)
  std::vector<uint8_t> q(8);
  std::vector<uint16_t> s(4);
  quant::quantize_int8_gw(w.data(), 2, 4, 2, false, q.data(), s.data(), nullptr);
  const float s00 = round_to_half(1.0f / 127.0f);
  CHECK(s[0 * 2 + 0] == float_to_half_bits(1.0f / 127.0f));
  CHECK(s[1 * 2 + 1] == 0);  // group 1 of column 1 is zero
  CHECK(q[0 * 2 + 0] == 128 + static_cast<int>(std::nearbyint(1.0f / s00)));  // k 0, n 0
  CHECK(q[1 * 2 + 0] == 128 + static_cast<int>(std::nearbyint(-0.5f / s00)));
  CHECK(q[0 * 2 + 1] == 128 - 127);  // -2 at amax: fp16 rounding of the scale still lands inside the clamp
  CHECK(q[3 * 2 + 1] == 128);
  QTensor t;
  t.type = WeightType::INT8_GW_SYM;
  t.rows = 2;
  t.cols = 4;
  t.group_size = 2;
  t.data = q.data();
  t.scales_f16 = s.data();
  CHECK(dequant_element(t, 0, 1) == static_cast<float>(q[1 * 2 + 0] - 128) * s00);
  CHECK(dequantize(t) == ref_int8_gw(w, 2, 4, 2, false));
}

TEST_CASE("INT8_GW_ASYM: s = f16((mx-mn)/255), z = f16(mn + 128 s), q clamped to [-128, 127]", "[formats]") {
  const std::vector<float> w = {0.0f, 1.0f, 2.0f, 3.0f, 5.0f, 5.0f, 5.0f, 5.0f};  // N = 1, K = 8, G = 4
  std::vector<uint8_t> q(8);
  std::vector<uint16_t> s(2), z(2);
  quant::quantize_int8_gw(w.data(), 1, 8, 4, true, q.data(), s.data(), z.data());
  const float s0 = round_to_half(3.0f / 255.0f);
  const float z0 = round_to_half(0.0f + 128.0f * s0);
  CHECK(half_bits_to_float(s[0]) == s0);
  CHECK(half_bits_to_float(z[0]) == z0);
  CHECK(q[0] == static_cast<uint8_t>(128 + std::clamp(static_cast<int>(std::nearbyint((0.0f - z0) / s0)), -128, 127)));
  // A constant group: s = 0, z = f16(value), every q = 0 -> u8 128, dequant exactly z.
  CHECK(s[1] == 0);
  CHECK(half_bits_to_float(z[1]) == 5.0f);
  CHECK(q[4] == 128);
  const quant::QuantizedTensor qt_ = quant::quantize_tensor(w.data(), 1, 8, WeightType::INT8_GW_ASYM, 4);
  CHECK(dequantize(qt_.view()) == ref_int8_gw(w, 1, 8, 4, true));
  CHECK(dequant_element(qt_.view(), 0, 6) == 5.0f);
}

TEST_CASE("AWQ nibble order: element e at nibble {0,4,1,5,2,6,3,7}[e], checked against hand-packed words", "[formats]") {
  const uint8_t seq[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  // Nibbles from least significant: e0 e2 e4 e6 e1 e3 e5 e7 = 0 2 4 6 1 3 5 7.
  CHECK(quant::awq_pack8(seq) == 0x75316420u);
  const uint8_t one_hot[8] = {0, 15, 0, 0, 0, 0, 0, 0};
  CHECK(quant::awq_pack8(one_hot) == 0x000F0000u);  // e1 -> bits 16..19
  const uint8_t e6[8] = {0, 0, 0, 0, 0, 0, 9, 0};
  CHECK(quant::awq_pack8(e6) == 0x00009000u);  // e6 -> bits 12..15
  for (uint32_t word : {0x75316420u, 0xDEADBEEFu, 0x01234567u}) {
    uint8_t v[8];
    for (int e = 0; e < 8; ++e) v[e] = quant::awq_unpack(word, e);
    CHECK(quant::awq_pack8(v) == word);
  }
  CHECK(quant::awq_unpack(0xDEADBEEFu, 0) == 0xF);
  CHECK(quant::awq_unpack(0xDEADBEEFu, 1) == 0xD);  // nibble 4
  CHECK(quant::awq_unpack(0xDEADBEEFu, 7) == 0xD);  // nibble 7
}

TEST_CASE("AWQ RTN: hand-computed qweight, qzeros and scales for an exact-scale example", "[formats]") {
  // N = 8 columns, K = 2, G = 2. Column n holds {-(n % 4), 15 - (n % 4)}: range 15 -> scale exactly 1,
  // zero = n % 4, q = {0, 15}.
  std::vector<float> w(16);
  for (int n = 0; n < 8; ++n) {
    w[static_cast<size_t>(n * 2)] = -static_cast<float>(n % 4);
    w[static_cast<size_t>(n * 2 + 1)] = 15.0f - static_cast<float>(n % 4);
  }
  int32_t qweight[2], qzeros[1];
  uint16_t scales[8];
  quant::quantize_awq_int4(w.data(), 8, 2, 2, qweight, qzeros, scales);
  CHECK(qweight[0] == 0);
  CHECK(static_cast<uint32_t>(qweight[1]) == 0xFFFFFFFFu);
  // zeros {0,1,2,3,0,1,2,3} -> nibbles (low first) e0 e2 e4 e6 e1 e3 e5 e7 = 0 2 0 2 1 3 1 3.
  CHECK(static_cast<uint32_t>(qzeros[0]) == 0x31312020u);
  for (uint16_t s : scales) CHECK(s == 0x3C00);
  QTensor t;
  t.type = WeightType::AWQ_INT4;
  t.rows = 8;
  t.cols = 2;
  t.group_size = 2;
  t.data = qweight;
  t.qzeros = qzeros;
  t.scales_f16 = scales;
  CHECK(dequantize(t) == w);  // exact: every value is an integer step of scale 1
}

TEST_CASE("AWQ RTN and INT8 group-wise match the rules on random data, storage_bytes matches the arrays", "[formats]") {
  const int64_t N = 24, K = 64, G = 16;
  const std::vector<float> w = random_floats(static_cast<size_t>(N * K), 7, 0.3f);
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::INT8_GW_SYM,
                       WeightType::INT8_GW_ASYM, WeightType::AWQ_INT4}) {
    INFO(weight_type_name(t));
    const quant::QuantizedTensor q = quant::quantize_tensor(w.data(), N, K, t, static_cast<int32_t>(G));
    const QTensor v = q.view();
    CHECK(dequantize(v) == ref_dequant(w, N, K, t, G));
    const uint64_t held = q.values.size() + q.scales_f32.size() * 4 + q.scales_f16.size() * 2 +
                          q.zeros_f16.size() * 2 + q.qweight.size() * 4 + q.qzeros.size() * 4;
    CHECK(v.storage_bytes() == held);
  }
  CHECK(std::string(weight_type_name(WeightType::AWQ_INT4)) == "AWQ_INT4");
}
