// Thread block clusters on a real GPU (sm_90): the default points of the Hopper GEMM families whose K split is
// summed by a cluster in distributed shared memory match their CPU references, on every test shape they take.
// The emulator checks the same kernels' synchronisation (test_emu_cluster, test_families_emu); this is where
// the hardware's own cluster launch, barrier.cluster, mapa and ld.shared::cluster run them. Skipped, visibly,
// without a GPU or on one older than sm_90.
#include <catch2/catch.hpp>

#include <string>

#include "device/cuda/cuda_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/registry.h"
#include "tests/skip.h"

TEST_CASE("on an sm_90 GPU the cluster split's default points of the Hopper GEMMs match their CPU references") {
  if (!qt::cuda::cuda_available()) QTUNE_SKIP("needs a GPU: " + qt::cuda::cuda_unavailable_reason());
  qt::cuda::CudaDevice dev;
  if (dev.arch() < 90) QTUNE_SKIP("needs sm_90 for clusters; this GPU is sm_" + std::to_string(dev.arch()));
  size_t verified = 0;
  for (const qt::kernels::KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host() || f->min_sm != 90) continue;
    for (const auto& point : f->default_points()) {
      if (!point.count("cluster") || point.at("cluster") == 1) continue;
      for (const auto& shape : f->test_shapes) {
        if (f->shape_constraint && !f->shape_constraint(point, shape).empty()) continue;
        INFO(f->name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape));
        CHECK(qt::plan::verify_point(&dev, *f, point, shape, 3).message == "");
        ++verified;
      }
    }
  }
  CHECK(verified > 0);
}
