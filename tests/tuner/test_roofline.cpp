// The roofline model of a point's time (tuner/static/roofline.h): never faster than the bandwidth and FLOP
// roofs of the GPU it models, bound where the arithmetic intensity says, ranking with Spearman's rank
// correlation as defined (ties at their mean rank), and printed by qtune static.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels_src/registry/registry.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"
#include "tuner/static/roofline.h"

using namespace qt;
using namespace qt::tune;

TEST_CASE("Spearman's rank correlation: +1 for the same order, -1 reversed, ties at their mean rank, NaN when undefined",
          "[tuner][roofline]") {
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 400}) == Approx(1.0));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0));
  // Ranks a = (1, 2.5, 2.5, 4), b = (1, 2, 3, 4): Pearson of the ranks = 4.5 / sqrt(4.5 * 5) = 0.9487.
  CHECK(spearman({1, 2, 2, 3}, {1, 2, 3, 4}) == Approx(4.5 / std::sqrt(4.5 * 5.0)));
  CHECK(std::isnan(spearman({1, 2}, {1, 2})));
  CHECK(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
  CHECK_THROWS(spearman({1, 2, 3}, {1, 2}));
}

TEST_CASE("the roofline model is never faster than the GPU's bandwidth and FLOP roofs", "[tuner][roofline]") {
  for (int sm : {80, 86, 89, 90}) {
    const GpuPeaks& peak = gpu_peaks(sm);
    for (const char* name : {"awq_frag_gemv", "awq_gemv", "awq_frag_gemm", "f16_gemm"}) {
      const kernels::KernelFamily& f = kernels::find_family(name);
      const bool gemv = std::string(name).find("gemv") != std::string::npos;
      const kernels::Shape s = f.shape({gemv ? 1 : 2048, 4096, 4096, f.name == "f16_gemm" ? 4096 : 128});
      for (const kernels::Point& p : f.default_points(s)) {
        if (!f.shape_constraint(p, s).empty()) continue;
        INFO(name << " " << kernels::point_key(p) << " on sm_" << sm);
        const RooflineEstimate e = estimate_point(f, p, s, sm);
        CHECK(e.seconds >= e.bytes / (peak.dram_gbps * 1e9));
        CHECK(e.seconds >= e.flops / (std::max(peak.tensor_tflops, peak.fp32_tflops) * 1e12));
        CHECK(e.bytes >= 4096.0 * 4096 / 2);  // at least the INT4 weights
        // One token reads the whole matrix for 2 flops a weight: memory-bound; 2048 tokens are compute-bound.
        CHECK(e.bound == (gemv ? "memory" : "compute"));
      }
    }
  }
  CHECK_THROWS_WITH(gpu_peaks(70), Catch::Contains("sm_70"));
}

TEST_CASE("qtune static prints the roofline model's fastest point for each shape a model needs, and writes every point's estimate",
          "[tuner][roofline][cli]") {
  const std::string json = test::tuner_scratch("roofline-static", ".json");
  const test::QtuneRun r = test::run_qtune("static --gpu sm90 --kernel awq_frag_gemv --json " + json);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("model: fastest point on H100 SXM") != std::string::npos);
  FILE* f = std::fopen(json.c_str(), "r");
  REQUIRE(f);
  const nlohmann::json j = nlohmann::json::parse(f);
  std::fclose(f);
  const auto& shapes = j["families"][0]["shapes"];
  REQUIRE(!shapes.empty());
  for (const auto& s : shapes) {
    REQUIRE(!s["model"].empty());
    for (const auto& p : s["model"]) {
      CHECK(p["model_us"].get<double>() > 0);
      CHECK(p["bound"] == "memory");  // the Qwen3-8B decode shapes, M = 1
    }
  }
}
