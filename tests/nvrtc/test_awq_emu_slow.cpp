// Exhaustive: every point of every AWQ parameter space on the emulator (label `slow`).
#include <catch2/catch.hpp>

#include "kernels_src/registry/registry.h"
#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"

namespace {

void verify_all(const std::string& family_name) {
  const auto& f = qt::kernels::find_family(family_name);
  qt::emu::EmuDevice dev;
  const auto shapes = f.test_shapes;
  const auto points = qt::kernels::enumerate_points(f);
  // One JIT compile for the whole space instead of one per point.
  const auto module = qt::plan::load_family_module(dev, f, points);
  for (const auto& point : points) {
    // The smallest shapes keep the sweep tractable; the default-point test covers the big ones.
    for (size_t i = 1; i < shapes.size(); ++i) {
      if (!f.shape_constraint(point, shapes[i]).empty()) continue;
      INFO(f.name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shapes[i]));
      const auto inputs = f.make_inputs(shapes[i], 11);
      const auto r = qt::plan::verify_point_with(&dev, f, point, shapes[i], inputs, f.reference(shapes[i], inputs), module);
      CHECK(r.message == "");
    }
  }
}

}  // namespace

TEST_CASE("AWQ default points report no race or other bug on scheduling seeds 1 to 10, every test shape") {
  for (const char* fam : {"awq_dequant", "awq_gemv", "awq_gemm"}) {
    const auto& f = qt::kernels::find_family(fam);
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      qt::emu::EmuOptions o;
      o.seed = seed;
      qt::emu::EmuDevice dev(o);
      for (const auto& point : f.default_points()) {
        for (const auto& shape : f.test_shapes) {
          if (!f.shape_constraint(point, shape).empty()) continue;
          INFO(f.name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape) << ", seed " << seed);
          CHECK(qt::plan::verify_point(&dev, f, point, shape, seed).message == "");
        }
      }
    }
  }
}

TEST_CASE("every awq_dequant point matches the reference on the emulator") { verify_all("awq_dequant"); }
TEST_CASE("every awq_gemv point matches the reference on the emulator") { verify_all("awq_gemv"); }
TEST_CASE("every awq_gemm point matches the reference on the emulator") { verify_all("awq_gemm"); }
