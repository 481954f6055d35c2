// The Q8_0 GEMM's two variants held to their own per-output error bounds on the emulator (the generic family
// test can only use one tolerance per buffer, the largest over outputs and variants), and the shape errors
// the Q8_0 and fp16 linear families report.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/q8_0/q8_reference.h"
#include "kernels_src/registry/registry.h"

namespace {

using qt::kernels::Point;
namespace q8 = qt::kernels::q8_0;

std::vector<float> run_y(qt::emu::EmuDevice& dev, const qt::kernels::KernelFamily& f, const Point& p,
                         const qt::kernels::Shape& shape, const qt::kernels::HostBuffers& in) {
  qt::plan::PlanRun run(&dev, f, p, shape, in);
  run.run();
  const std::vector<uint8_t> bytes = run.output("y");
  std::vector<uint16_t> h(bytes.size() / 2);
  std::memcpy(h.data(), bytes.data(), bytes.size());
  std::vector<float> y(h.size());
  for (size_t i = 0; i < h.size(); ++i) y[i] = qt::half_bits_to_float(h[i]);
  return y;
}

Point point_with_act(const qt::kernels::KernelFamily& f, int64_t act) {
  for (const Point& p : f.default_points())
    if (p.at("act") == act) return p;
  FAIL("no default point with act=" << act);
  return {};
}

}  // namespace

TEST_CASE("q8_0_gemm act=0 stays within its fp16-weight bound and act=1 matches int8 activations, per output") {
  const auto& f = qt::kernels::find_family("q8_0_gemm");
  const int64_t M = 19, N = 64, K = 256, G = 64;
  const auto shape = f.shape({M, N, K, G}, "per-output bounds");
  const auto in = f.make_inputs(shape, 5);
  q8::Q8Data d;
  d.m = M, d.n = N, d.k = K, d.group = G;
  d.x.resize(size_t(M * K));
  std::memcpy(d.x.data(), in.at("x").data(), in.at("x").size());
  d.q.resize(size_t(N * K));
  std::memcpy(d.q.data(), in.at("q").data(), in.at("q").size());
  d.scales.resize(size_t(N * K / G));
  std::memcpy(d.scales.data(), in.at("scales").data(), in.at("scales").size());
  const q8::Q8Result exact = q8::reference_linear(d);
  const double acc_steps = double(K / 8 + 64) * std::ldexp(1.0, -24);
  auto out_tol = [](double want) { return std::ldexp(1.0, -10) * std::abs(want) + std::ldexp(1.0, -24); };
  qt::emu::EmuDevice dev;

  // act=0: fp16(q * s) weights, fp32 sums.
  const std::vector<float> y0 = run_y(dev, f, point_with_act(f, 0), shape, in);
  for (size_t o = 0; o < y0.size(); ++o) {
    const double bound = acc_steps * exact.abs_xw[o] + std::ldexp(1.0, -11) * exact.abs_xw[o] +
                         std::ldexp(1.0, -25) * exact.abs_x[o] + out_tol(exact.y[o]);
    INFO("act=0 output " << o << ": got " << y0[o] << ", want " << exact.y[o] << ", bound " << bound);
    REQUIRE(std::abs(y0[o] - exact.y[o]) <= bound);
  }

  // act=1: the exact result of the quantized activations (int8 sums are exact), up to fp32 scaling and sums.
  std::vector<int8_t> xq;
  std::vector<float> xs;
  q8::quantize_activations(d, xq, xs);
  double largest_quantization_effect = 0;
  const std::vector<float> y1 = run_y(dev, f, point_with_act(f, 1), shape, in);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double want = 0, abs_sum = 0;
      for (int64_t g = 0; g < K / G; ++g) {
        int64_t dot = 0, abs_dot = 0;
        for (int64_t k = g * G; k < (g + 1) * G; ++k) {
          dot += int64_t{xq[size_t(m * K + k)]} * d.q[size_t(n * K + k)];
          abs_dot += std::abs(int64_t{xq[size_t(m * K + k)]} * d.q[size_t(n * K + k)]);
        }
        const double scale = double(xs[size_t(m * K / G + g)]) * d.scales[size_t((n * K + g * G) / G)];
        want += scale * double(dot);
        abs_sum += std::abs(scale) * double(abs_dot);
      }
      const size_t o = size_t(m * N + n);
      // Per tile: one fp32 conversion of the s32 sum, one product of the two scales, one multiply-add.
      const double bound = (acc_steps + 3 * std::ldexp(1.0, -24)) * abs_sum + out_tol(want);
      INFO("act=1 output " << o << ": got " << y1[o] << ", want " << want << ", bound " << bound);
      REQUIRE(std::abs(y1[o] - want) <= bound);
      largest_quantization_effect = std::max(largest_quantization_effect, std::abs(want - exact.y[o]) / bound);
    }
  }
  // The quantized reference must differ from the exact one by more than the bound somewhere, or this case
  // could not tell int8 activations from fp16 ones.
  CHECK(largest_quantization_effect > 4.0);
}

TEST_CASE("the Q8_0 and fp16 linear families name the shape they reject") {
  const auto& gemv = qt::kernels::find_family("q8_0_gemv");
  CHECK(gemv.shape_constraint(gemv.default_point(), gemv.shape({9, 64, 256, 64})) == "GEMV serves M <= 8");
  CHECK(gemv.shape_constraint(gemv.default_point(), gemv.shape({1, 64, 250, 64})) ==
        "K must be a multiple of the group size G");
  const auto& gemm = qt::kernels::find_family("q8_0_gemm");
  Point p = gemm.default_point();
  p["bk"] = 64;
  CHECK(gemm.shape_constraint(p, gemm.shape({16, 64, 256, 32})) == "the group size must be a multiple of bk=64");
  const auto& f16 = qt::kernels::find_family("f16_gemm");
  CHECK(f16.shape_constraint(f16.default_point(), f16.shape({4, 64, 256, 64})) ==
        "G must equal K for fp16 weights (got G=64)");
  CHECK(f16.shape_constraint(f16.default_point(), f16.shape({4, 64, 100, 100})) ==
        "K must be a multiple of 8 (16-byte rows of fp16)");
}
