// Exhaustive (label `slow`): every point of every device family's space on the emulator, on the family's
// test shapes after the first (the first is the large, model-derived one the default-point test covers).
#include <catch2/catch.hpp>

#include <algorithm>

#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/registry.h"

using qt::kernels::KernelFamily;

TEST_CASE("every device family's default points report no bug on scheduling seeds 1 to 10, every test shape") {
  for (const KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host()) continue;
    DYNAMIC_SECTION(f->name) {
      for (uint64_t seed = 1; seed <= 10; ++seed) {
        qt::emu::EmuOptions options;
        options.seed = seed;
        options.arch = std::max(options.arch, f->min_sm);
        qt::emu::EmuDevice dev(options);
        for (const auto& point : f->default_points()) {
          for (const auto& shape : f->test_shapes) {
            if (f->shape_constraint && !f->shape_constraint(point, shape).empty()) continue;
            INFO(f->name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape) << ", seed "
                         << seed);
            CHECK(qt::plan::verify_point(&dev, *f, point, shape, seed).message == "");
          }
        }
      }
    }
  }
}

TEST_CASE("every point of every device family matches its CPU reference on the emulator") {
  for (const KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host()) continue;
    DYNAMIC_SECTION(f->name) {
      qt::emu::EmuOptions options;
      options.arch = std::max(options.arch, f->min_sm);
      qt::emu::EmuDevice dev(options);
      const auto points = qt::kernels::enumerate_points(*f);
      // One JIT compile for the whole space instead of one per point.
      const auto module = qt::plan::load_family_module(dev, *f, points);
      const size_t first = f->test_shapes.size() > 1 ? 1 : 0;
      for (const auto& point : points) {
        for (size_t i = first; i < f->test_shapes.size(); ++i) {
          const auto& shape = f->test_shapes[i];
          if (f->shape_constraint && !f->shape_constraint(point, shape).empty()) continue;
          INFO(f->name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape));
          const auto inputs = f->make_inputs(shape, 11);
          const auto r = qt::plan::verify_point_with(&dev, *f, point, shape, inputs, f->reference(shape, inputs), module);
          CHECK(r.message == "");
        }
      }
    }
  }
}
