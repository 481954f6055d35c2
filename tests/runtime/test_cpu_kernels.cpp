// The SIMD kernels of every instruction set this CPU has, against the scalar definition and plain sums.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "common/half.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"
#include "tests/runtime/random_model.h"

using namespace qt;
using namespace qt::rt;

TEST_CASE("int8 group dot products of every ISA equal the exact integer sums", "[runtime][kernels]") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> wq(-128, 127), xq(-127, 127);
  for (int64_t group : {8, 16, 32, 64, 128}) {
    const int64_t k = group * 6;
    std::vector<int8_t> w(static_cast<size_t>(k)), x(static_cast<size_t>(k));
    for (auto& v : w) v = int8_t(wq(rng));
    for (auto& v : x) v = int8_t(xq(rng));
    w[0] = -128;  // the one value whose magnitude does not fit int8
    x[0] = -127;
    std::vector<float> ws = test::random_values(rng, static_cast<size_t>(k / group), 0.01f), xs = test::random_values(rng, static_cast<size_t>(k / group), 0.02f);
    double expect = 0.0;
    for (int64_t g = 0; g < k / group; ++g) {
      int64_t s = 0;
      for (int64_t i = g * group; i < (g + 1) * group; ++i) s += int64_t(w[i]) * x[i];
      expect += double(s) * double(ws[g]) * double(xs[g]);
    }
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << " group " << group);
      const float got = kernels_for(isa).dot_i8(w.data(), x.data(), ws.data(), xs.data(), k, group);
      CHECK(std::fabs(got - expect) <= 1e-5 * (1.0 + std::fabs(expect)));
    }
  }
}

TEST_CASE("4-bit dot products of every ISA equal the dequantized sums", "[runtime][kernels]") {
  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int> nib(0, 15), xq(-127, 127);
  for (int64_t group : {32, 64, 128}) {
    const int64_t k = group * 4;
    std::vector<int> q(static_cast<size_t>(k));
    std::vector<uint8_t> packed(static_cast<size_t>(k / 2), 0);
    std::vector<int8_t> x(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      q[i] = nib(rng);
      x[i] = int8_t(xq(rng));
      const int64_t b = i / 32, j = i % 32;
      packed[b * 16 + j % 16] |= uint8_t(j < 16 ? q[i] : q[i] << 4);
    }
    std::vector<float> ws = test::random_values(rng, static_cast<size_t>(k / group), 0.01f);
    std::vector<float> xs = test::random_values(rng, static_cast<size_t>(k / group), 0.02f), wz(static_cast<size_t>(k / group));
    std::vector<int32_t> qsum(static_cast<size_t>(k / group), 0);
    double expect = 0.0;
    for (int64_t g = 0; g < k / group; ++g) {
      wz[g] = float(nib(rng));
      for (int64_t i = g * group; i < (g + 1) * group; ++i) {
        qsum[g] += x[i];
        expect += (double(q[i]) - wz[g]) * ws[g] * double(x[i]) * xs[g];
      }
    }
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << " group " << group);
      const float got =
          kernels_for(isa).dot_u4(packed.data(), x.data(), ws.data(), wz.data(), xs.data(), qsum.data(), k, group);
      CHECK(std::fabs(got - expect) <= 1e-4 * (1.0 + std::fabs(expect)));
    }
  }
}

TEST_CASE("float dot products of every ISA match double sums for any length", "[runtime][kernels]") {
  std::mt19937_64 rng(9);
  for (int64_t k : {1, 7, 16, 33, 100, 257}) {
    const std::vector<float> w = test::random_values(rng, static_cast<size_t>(k), 1.0f), x = test::random_values(rng, static_cast<size_t>(k), 1.0f);
    std::vector<uint16_t> h(static_cast<size_t>(k)), b(static_cast<size_t>(k));
    double e32 = 0, e16 = 0, eb = 0;
    for (int64_t i = 0; i < k; ++i) {
      h[i] = float_to_half_bits(w[i]);
      b[i] = float_to_bf16_bits(w[i]);
      e32 += double(w[i]) * x[i];
      e16 += double(half_bits_to_float(h[i])) * x[i];
      eb += double(bf16_bits_to_float(b[i])) * x[i];
    }
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << " k " << k);
      const CpuKernels& kr = kernels_for(isa);
      CHECK(kr.dot_f32(w.data(), x.data(), k) == Approx(e32).margin(1e-5));
      CHECK(kr.dot_f16(h.data(), x.data(), k) == Approx(e16).margin(1e-5));
      CHECK(kr.dot_bf16(b.data(), x.data(), k) == Approx(eb).margin(1e-5));
    }
  }
}

TEST_CASE("the detected ISA is one this CPU can run", "[runtime][kernels]") {
  const Isa best = detect_isa();
  CHECK(kernels_for(best).isa == best);
  CHECK(std::string(isa_name(best)).size() > 0);
}

TEST_CASE("the four-row int8 kernel is bit-identical to four single-row calls", "[runtime][kernels]") {
  std::mt19937_64 rng(10);
  std::uniform_int_distribution<int> wq(-128, 127), xq(-127, 127);
  for (int64_t group : {16, 32, 64, 128}) {
    const int64_t k = group * 4, ng = 4;
    std::vector<int8_t> w(static_cast<size_t>(k)), x(static_cast<size_t>(4 * k));
    for (auto& v : w) v = int8_t(wq(rng));
    for (auto& v : x) v = int8_t(xq(rng));
    const std::vector<float> ws = test::random_values(rng, ng, 0.01f), xs = test::random_values(rng, 4 * ng, 0.02f);
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << " group " << group);
      const CpuKernels& kr = kernels_for(isa);
      float out[4];
      kr.dot_i8_x4(w.data(), x.data(), k, ws.data(), xs.data(), ng, k, group, out);
      for (int r = 0; r < 4; ++r) CHECK(out[r] == kr.dot_i8(w.data(), x.data() + r * k, ws.data(), xs.data() + r * ng, k, group));
    }
  }
}
