// Every device family registered in kernels_src/, run on the CPU emulator (with its race, bounds, alignment,
// barrier and cp.async checks) against the family's CPU reference: each default point on every test shape it
// accepts, on two input seeds. A new family is covered by registering it; `-c <family>` runs one family.
#include <catch2/catch.hpp>

#include <iostream>

#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/registry.h"

using qt::kernels::KernelFamily;

TEST_CASE("every device family's default points match its CPU reference on the emulator") {
  qt::emu::EmuDevice dev;
  for (const KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host()) continue;
    DYNAMIC_SECTION(f->name) {
      const auto points = f->default_points();
      REQUIRE(!points.empty());
      REQUIRE(!f->test_shapes.empty());
      const auto module = qt::plan::load_family_module(dev, *f, points);
      size_t verified = 0;
      for (const auto& point : points) {
        // A point whose shape constraint rejects every test shape would pass having verified nothing.
        size_t shapes_run = 0;
        for (const auto& shape : f->test_shapes) {
          if (f->shape_constraint && !f->shape_constraint(point, shape).empty()) continue;
          for (uint64_t seed : {7u, 8u}) {
            INFO(f->name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape) << " ("
                         << shape.label << "), seed " << seed);
            const auto inputs = f->make_inputs(shape, seed);
            const auto r = qt::plan::verify_point_with(&dev, *f, point, shape, inputs, f->reference(shape, inputs), module);
            CHECK(r.message == "");
          }
          ++shapes_run;
        }
        INFO(f->name << " " << qt::kernels::point_key(point) << ": the shape constraint rejects every test shape");
        REQUIRE(shapes_run > 0);
        verified += shapes_run;
      }
      std::cout << f->name << ": verified " << verified << " (point, shape) pairs over " << points.size()
                << " default points\n";
    }
  }
}
