// The PTX reference semantics (kernels_src/common/emu_ops.h, emu_half.h) against independent formulations of
// the PTX ISA: lop3 for all 256 LUTs, prmt, shfl lane selection, per-operation fp16/bf16 rounding, and the
// wgmma descriptor fields and fragments (the descriptors' layouts are checked end to end by test_hopper.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels_src/common/emu_ops.h"
#include "tests/emu/ref_round.h"

using namespace qt::emu;

TEST_CASE("lop3 reference matches the ISA truth-table definition for all 256 LUTs") {
  std::mt19937 rng(5);
  for (uint32_t lut = 0; lut < 256; ++lut) {
    // immLut = F(0xF0, 0xCC, 0xAA).
    REQUIRE((lop3_ref(0xF0, 0xCC, 0xAA, lut) & 0xFF) == lut);
    for (int s = 0; s < 64; ++s) {
      const uint32_t a = rng(), b = rng(), c = rng();
      uint32_t expect = 0;
      for (int i = 0; i < 32; ++i) {
        const uint32_t idx = (((a >> i) & 1u) << 2) | (((b >> i) & 1u) << 1) | ((c >> i) & 1u);
        expect |= ((lut >> idx) & 1u) << i;
      }
      REQUIRE(lop3_ref(a, b, c, lut) == expect);
    }
  }
  CHECK(lop3_ref(0xF0F0F0F0u, 0xCCCCCCCCu, 0xAAAAAAAAu, 0xEA) == ((0xF0F0F0F0u & 0xCCCCCCCCu) | 0xAAAAAAAAu));
}

TEST_CASE("prmt reference selects bytes and replicates sign bits") {
  const uint32_t a = 0x83828180u, b = 0x07060504u;  // bytes 0..3 = 80 81 82 83, 4..7 = 04 05 06 07
  CHECK(prmt_ref(a, b, 0x3210) == a);
  CHECK(prmt_ref(a, b, 0x7654) == b);
  CHECK(prmt_ref(a, b, 0x5140) == 0x05810480u);
  CHECK(prmt_ref(a, b, 0x0008) == 0x808080FFu);  // nibble 8: sign of byte 0 (0x80) replicated
  CHECK(prmt_ref(a, b, 0x000C) == 0x80808000u);  // nibble 0xC: sign of byte 4 (0x04) replicated
}

TEST_CASE("shfl source lane follows the PTX clamp/segment rules for every width") {
  for (uint32_t width : {1u, 2u, 4u, 8u, 16u, 32u}) {
    const uint32_t c_down = ((32 - width) << 8) | 0x1f, c_up = (32 - width) << 8;
    for (uint32_t lane = 0; lane < 32; ++lane) {
      const uint32_t seg = lane / width * width;
      for (uint32_t d = 0; d < 32; ++d) {
        const int idx = shfl_source_lane(3, lane, d, c_down);
        REQUIRE(idx == static_cast<int>(seg + d % width));
        const int down = shfl_source_lane(1, lane, d, c_down);
        REQUIRE(down == ((lane % width) + d < width ? static_cast<int>(lane + d) : -1));
        const int up = shfl_source_lane(0, lane, d, c_up);
        REQUIRE(up == ((lane % width) >= d ? static_cast<int>(lane - d) : -1));
        const int bfly = shfl_source_lane(2, lane, d, c_down);
        REQUIRE(bfly == ((lane ^ d) < seg + width ? static_cast<int>(lane ^ d) : -1));
      }
    }
  }
}

namespace {
uint16_t random_half(std::mt19937& rng) {
  for (;;) {
    const uint16_t h = static_cast<uint16_t>(rng());
    if ((h & 0x7C00) != 0x7C00) return h;  // finite
  }
}
}  // namespace

TEST_CASE("fp16 add, sub, mul and fma round once to nearest even") {
  std::mt19937 rng(11);
  for (int s = 0; s < 200000; ++s) {
    const uint16_t a = random_half(rng), b = random_half(rng);
    // Nearby exponents make ties and cancellations common.
    uint16_t c = random_half(rng);
    if (s % 2) c = static_cast<uint16_t>((c & 0x83FF) | (a & 0x7C00));
    const uint32_t A = pack16(a, c), B = pack16(b, a), C = pack16(c, b);
    const test::i128 sa = test::half_scaled(a), sb = test::half_scaled(b), sc = test::half_scaled(c);
    const test::i128 ab = test::half_product_scaled(a, b);
    INFO("a=" << a << " b=" << b << " c=" << c);
    REQUIRE(test::same_half(lo16(f16x2_add(A, B)), test::round_scaled_to_half(sa + sb)));
    REQUIRE(test::same_half(lo16(f16x2_sub(A, B)), test::round_scaled_to_half(sa - sb)));
    REQUIRE(test::same_half(lo16(f16x2_mul(A, B)), test::round_scaled_to_half(ab)));
    REQUIRE(test::same_half(lo16(f16x2_fma(A, B, C)), test::round_scaled_to_half(ab + sc)));
    // High lanes are independent.
    REQUIRE(test::same_half(hi16(f16x2_fma(A, B, C)),
                            test::round_scaled_to_half(test::half_product_scaled(c, a) + test::half_scaled(b))));
    // The CUDA __half type rounds per operation too.
    const __half ha = __ushort_as_half(a), hb = __ushort_as_half(b), hc = __ushort_as_half(c);
    REQUIRE(__half_as_ushort(__hfma(ha, hb, hc)) == lo16(f16x2_fma(A, B, C)));
    const uint16_t prod = test::round_scaled_to_half(ab);
    if ((prod & 0x7C00) != 0x7C00) {
      REQUIRE(test::same_half(__half_as_ushort(ha * hb + hc), test::round_scaled_to_half(test::half_scaled(prod) + sc)));
    }
  }
}

TEST_CASE("bf16 fma rounds once to nearest even") {
  std::mt19937 rng(13);
  auto bf = [&]() {  // moderate exponents so that a*b+c is exact in double
    const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
    const uint16_t exp = static_cast<uint16_t>(127 - 6 + rng() % 13);
    return static_cast<uint16_t>(sign | (exp << 7) | (rng() & 0x7F));
  };
  for (int s = 0; s < 200000; ++s) {
    const uint16_t a = bf(), b = bf(), c = bf();
    const double exact = static_cast<double>(qt::bf16_bits_to_float(a)) * qt::bf16_bits_to_float(b) + qt::bf16_bits_to_float(c);
    INFO("a=" << a << " b=" << b << " c=" << c);
    REQUIRE(lo16(bf16x2_fma(pack16(a, 0), pack16(b, 0), pack16(c, 0))) == test::round_double_to_bf16(exact));
  }
}

TEST_CASE("__half and __nv_bfloat16 built from a double round once, not twice through float") {
  // Just above the midpoint between two neighbours: float rounding alone would land exactly on the midpoint
  // and the second rounding would tie to even (down); a single rounding goes up.
  const double above_half_mid = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(__half_as_ushort(__half(above_half_mid)) == 0x3C01);
  CHECK(__half_as_ushort(__half(-above_half_mid)) == 0xBC01);
  const double above_bf16_mid = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(__bfloat16_as_ushort(__nv_bfloat16(above_bf16_mid)) == test::round_double_to_bf16(above_bf16_mid));
  CHECK(__bfloat16_as_ushort(__nv_bfloat16(above_bf16_mid)) == 0x3F81);
  // Values a float holds exactly, infinities and overflow keep their plain conversions.
  CHECK(__half_as_ushort(__half(0.5)) == 0x3800);
  CHECK(__half_as_ushort(__half(1e10)) == 0x7C00);
  CHECK(__half_as_ushort(__half(-std::numeric_limits<double>::infinity())) == 0xFC00);
  CHECK(__bfloat16_as_ushort(__nv_bfloat16(1e300)) == 0x7F80);
}

TEST_CASE("wgmma descriptors hold start, LBO, SBO and swizzle in the PTX bit fields and decode back exactly") {
  const uint64_t d = qt::wgmma_desc_encode(0x1230, 0x40, 0x400, qt::kSwizzle128B);
  CHECK((d & 0x3FFF) == 0x123);          // bits 0-13: start >> 4
  CHECK(((d >> 16) & 0x3FFF) == 0x4);    // bits 16-29: LBO >> 4
  CHECK(((d >> 32) & 0x3FFF) == 0x40);   // bits 32-45: SBO >> 4
  CHECK(((d >> 49) & 7) == 0);           // bits 49-51: base offset
  CHECK((d >> 62) == 1);                 // bits 62-63: 1 = 128B
  CHECK((qt::wgmma_desc_encode(0, 0, 0, qt::kSwizzle64B) >> 62) == 2);
  CHECK((qt::wgmma_desc_encode(0, 0, 0, qt::kSwizzle32B) >> 62) == 3);
  CHECK((d & ((uint64_t{3} << 14) | (uint64_t{3} << 30) | (uint64_t{7} << 46))) == 0);  // reserved bits clear
  // Past 256 KiB (the emulator's dynamic shared memory) the address keeps its bits 18-19 in bits 14-15.
  const WgmmaDescFields f = wgmma_desc_decode(emu_wgmma_desc(0x43210, 16, 1024, qt::kSwizzle64B));
  CHECK(f.start == 0x43210);
  CHECK(f.lbo == 16);
  CHECK(f.sbo == 1024);
  CHECK(f.base_offset == 0);
  CHECK(f.swizzle == qt::kSwizzle64B);
}

TEST_CASE("wgmma fragments cover the 64 x 16 A and 64 x N D tiles exactly once, each warp its own 16 rows") {
  std::vector<int> a(64 * 16, 0), d(64 * 256, 0);
  for (int t = 0; t < 128; ++t) {
    for (int i = 0; i < 8; ++i) {
      CHECK(wgmma_a_row(t, i) / 16 == t / 32);
      ++a[wgmma_a_row(t, i) * 16 + wgmma_a_col(t, i)];
    }
    for (int i = 0; i < 128; ++i) {
      CHECK(wgmma_d_row(t, i) / 16 == t / 32);
      ++d[wgmma_d_row(t, i) * 256 + wgmma_d_col(t, i)];
    }
  }
  for (int x : a) REQUIRE(x == 1);
  for (int x : d) REQUIRE(x == 1);
  // Pairs of adjacent elements share a register (A) or are consecutive floats (D): lane 5, element 1.
  CHECK(wgmma_a_col(5, 1) == wgmma_a_col(5, 0) + 1);
  CHECK(wgmma_d_col(5, 1) == wgmma_d_col(5, 0) + 1);
  CHECK(wgmma_d_row(37, 2) == 16 + 1 + 8);  // warp 1, lane 5: group 1, second row half
}
