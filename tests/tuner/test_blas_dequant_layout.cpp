// The dequant + cuBLASLt baselines without a GPU: cuBLASLt cannot run here, so its GEMM is done on the CPU the
// way device/blas's table tells cuBLASLt to read the fp16 weights ([N][K] or [K][N]), on what the baseline's
// dequant family wrote on the emulator from the problem family's inputs. That must be the problem's y; a row
// naming the wrong layout, or a dequant writing another, fails here.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/half.h"
#include "device/blas/blas_lt.h"
#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/family_util.h"
#include "kernels_src/registry/registry.h"
#include "tuner/family/blas_baselines.h"

using namespace qt;

namespace {

// y = x W^T in double, W read from fp16 `w` in `layout`.
std::vector<double> gemm(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, blas::WeightLayout layout,
                         int64_t m, int64_t n, int64_t k) {
  std::vector<double> y(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const size_t wi = size_t(layout == blas::WeightLayout::NK ? j * k + kk : kk * n + j);
        acc += double(half_bits_to_float(x[size_t(i * k + kk)])) * double(half_bits_to_float(w[wi]));
      }
      y[size_t(i * n + j)] = acc;
    }
  return y;
}

// Outputs outside the expectation's tolerance.
size_t misses(const std::vector<double>& y, const kernels::Expected& e) {
  size_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i)
    bad += std::fabs(y[i] - e.values[i]) > e.abs_tol + e.rel_tol * std::fabs(double(e.values[i]));
  return bad;
}

}  // namespace

TEST_CASE("each dequant + cuBLASLt baseline's dequant writes the fp16 layout its GEMM reads, on the emulator",
          "[tuner][blas]") {
  emu::EmuDevice device;
  size_t checked = 0;
  for (const blas::Baseline& row : blas::kBaselines) {
    if (!row.dequant_family) continue;
    DYNAMIC_SECTION(row.store_name) {
      const kernels::KernelFamily* baseline = tune::find_blas_baseline(row.store_name);
      REQUIRE(baseline);
      const kernels::KernelFamily& problem = kernels::find_family(row.problem_family);
      const kernels::KernelFamily& dq = kernels::find_family(row.dequant_family);
      // A shape with N != K, so that reading the weights transposed cannot pass by symmetry.
      const kernels::Shape shape = problem.test_shapes.front();
      const int64_t m = shape["M"], n = shape["N"], k = shape["K"];
      REQUIRE(n != k);
      INFO(dq.name << " on " << kernels::shape_key(shape));
      const kernels::HostBuffers inputs = baseline->make_inputs(shape, 1);
      plan::PlanRun run(&device, dq, dq.default_point(), dq.shape_from(shape), inputs);
      run.run();
      const std::vector<uint16_t> w = kernels::from_bytes<uint16_t>(run.output("w"));
      REQUIRE(w.size() == size_t(n * k));
      const std::vector<uint16_t> x = kernels::from_bytes<uint16_t>(inputs.at("x"));
      // The baseline checks y alone, whatever else its problem family checks of its own kernel.
      const std::vector<kernels::Expected> expected = baseline->reference(shape, inputs);
      REQUIRE(expected.size() == 1);
      REQUIRE(expected[0].buffer == "y");
      REQUIRE(expected[0].values.size() == size_t(m * n));
      CHECK(misses(gemm(x, w, row.layout, m, n, k), expected[0]) == 0);
      const blas::WeightLayout other = row.layout == blas::WeightLayout::NK ? blas::WeightLayout::KN : blas::WeightLayout::NK;
      CHECK(misses(gemm(x, w, other, m, n, k), expected[0]) > 0);
      ++checked;
    }
  }
  CHECK(checked > 0);
}
