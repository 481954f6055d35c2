// Every default point of the AWQ families, run on the CPU emulator (with its race, bounds, alignment,
// barrier and cp.async checks) against the CPU reference, on Qwen3-8B-derived and odd shapes.
#include <catch2/catch.hpp>

#include "common/half.h"
#include "kernels_src/registry/registry.h"
#include "runtime/emu/emu_device.h"
#include "tests/nvrtc/awq_emu_shapes.h"
#include "tuner/compile/verify_point.h"

using qt::kernels::KernelFamily;

namespace {

void verify_defaults(const std::string& family_name) {
  const KernelFamily& f = qt::kernels::find_family(family_name);
  qt::emu::EmuDevice dev;
  for (const auto& point : f.default_points()) {
    for (const auto& shape : qt::test::awq_emu_shapes(family_name)) {
      if (!f.shape_constraint(point, shape).empty()) continue;
      INFO(f.name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape) << " ("
                  << shape.label << ")");
      const auto r = qt::compile::verify_point(dev, f, point, shape, 7);
      CHECK(r.message == "");
      CHECK(r.passed);
    }
  }
}

}  // namespace

TEST_CASE("awq_dequant default points reproduce the reference bit for bit on the emulator") {
  verify_defaults("awq_dequant");
}

TEST_CASE("awq_gemv default points match the reference on the emulator") { verify_defaults("awq_gemv"); }

TEST_CASE("awq_gemm default points match the reference on the emulator") { verify_defaults("awq_gemm"); }

TEST_CASE("a wrong reference is caught: verification compares real numbers") {
  // Guard against a verifier that passes everything: perturb one input after planning by using a
  // different seed for the reference than for the device run.
  const KernelFamily& f = qt::kernels::find_family("awq_dequant");
  qt::kernels::ProblemShape s{1, 64, 128, 32, "tiny"};
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
