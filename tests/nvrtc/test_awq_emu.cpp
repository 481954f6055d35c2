// The AWQ families against data made outside qtune: the independent Python golden (tests/golden/awq_packing),
// and a wrong expectation that verification must reject. Default points of every family, AWQ included, are
// verified against their CPU references in test_families_emu.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "common/half.h"
#include "kernels_src/registry/registry.h"
#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "common/paths.h"

using qt::kernels::KernelFamily;

namespace {

std::vector<uint8_t> golden(const std::string& name) {
  std::ifstream in(qt::source_root() + "/tests/golden/awq_packing/" + name, std::ios::binary);
  REQUIRE(in);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("dequant and GEMV kernels reproduce the independent Python AWQ golden (tests/golden/awq_packing)") {
  // K=64, N=32, G=32, quantized and packed by scripts/golden (numpy), with all-zero / all-positive /
  // all-negative / constant groups; dequant.f32 is (q - zero) * scale as W[N][K].
  const int64_t K = 64, N = 32, G = 32, M = 3;
  qt::kernels::HostBuffers in = {{"qweight", golden("qweight.i32")}, {"qzeros", golden("qzeros.i32")},
                                 {"scales", golden("scales.f16")}};
  const std::vector<uint8_t> deq_bytes = golden("dequant.f32");
  REQUIRE(deq_bytes.size() == size_t(N * K * 4));
  std::vector<float> w_nk(size_t(N * K));
  std::memcpy(w_nk.data(), deq_bytes.data(), deq_bytes.size());
  std::vector<uint16_t> x(size_t(M * K));
  for (size_t i = 0; i < x.size(); ++i) x[i] = qt::float_to_half_bits(float(int(i * 37 % 29) - 14) / 16.0f);
  in["x"].resize(x.size() * 2);
  std::memcpy(in["x"].data(), x.data(), in["x"].size());

  qt::emu::EmuDevice dev;
  // Dequant: W[K][N] fp16 = fp16 of the golden value, bit for bit.
  qt::kernels::Expected wexp;
  wexp.buffer = "w";
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) wexp.values.push_back(qt::round_to_half(w_nk[size_t(n * K + k)]));
  const auto& dq = qt::kernels::find_family("awq_dequant");
  for (int64_t words : {1, 2, 4}) {
    auto p = dq.default_point();
    p["words"] = words;
    const auto r = qt::plan::verify_point_with(&dev, dq, p, dq.shape({M, N, K, G}, "golden"), in, {wexp});
    CHECK(r.message == "");
  }
  // GEMV: y = x * fp16(W), accumulated in double here.
  qt::kernels::Expected yexp;
  yexp.buffer = "y";
  double bound = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = double(qt::half_bits_to_float(x[size_t(m * K + k)])) * qt::round_to_half(w_nk[size_t(n * K + k)]);
        acc += t, mag += std::fabs(t);
      }
      yexp.values.push_back(float(acc));
      bound = std::max(bound, mag);
    }
  yexp.abs_tol = 16.0 * std::sqrt(double(K)) * std::ldexp(1.0, -24) * bound + 1e-6;
  yexp.rel_tol = std::ldexp(1.0, -10);
  const auto& gemv = qt::kernels::find_family("awq_gemv");
  for (const auto& p : gemv.default_points()) {
    INFO(qt::kernels::point_key(p));
    if (!gemv.shape_constraint(p, gemv.shape({M, N, K, G})).empty()) continue;
    const auto r = qt::plan::verify_point_with(&dev, gemv, p, gemv.shape({M, N, K, G}, "golden"), in, {yexp});
    CHECK(r.message == "");
  }
}

TEST_CASE("a wrong reference is caught: verification compares real numbers") {
  // Guard against a verifier that passes everything: perturb one input after planning by using a
  // different seed for the reference than for the device run.
  const KernelFamily& f = qt::kernels::find_family("awq_dequant");
  const qt::kernels::Shape s = f.shape({1, 64, 128, 32}, "tiny");
  const auto in_a = f.make_inputs(s, 1);
  const auto in_b = f.make_inputs(s, 2);
  const auto want_a = f.reference(s, in_a);
  const auto want_b = f.reference(s, in_b);
  const auto plan = f.plan(f.default_point(), s);
  std::vector<uint8_t> bytes(want_a[0].values.size() * 2);
  for (size_t i = 0; i < want_a[0].values.size(); ++i) {
    const uint16_t h = qt::float_to_half_bits(want_a[0].values[i]);
    bytes[2 * i] = uint8_t(h & 0xff), bytes[2 * i + 1] = uint8_t(h >> 8);
  }
  CHECK(qt::kernels::compare_output(plan.buffer("w"), bytes, want_a[0]) == "");
  CHECK(qt::kernels::compare_output(plan.buffer("w"), bytes, want_b[0]) != "");
}
