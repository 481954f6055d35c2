// The roofline model of a point's time (tuner/static/roofline.h): never faster than the bandwidth and FLOP
// roofs of the GPU it models, bound where the arithmetic intensity says, ranking with Spearman's rank
// correlation as defined (ties at their mean rank), and printed by qtune static.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "kernels_src/registry/registry.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"
#include "device/jit/compile_service.h"
#include "tests/tuner/h200_fixture.h"
#include "tuner/static/roofline.h"
#include "tuner/store/store.h"

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
    for (const char* name : {"awq_frag_gemv", "awq_gemv", "awq_frag_gemm", "f16_gemm", "awq_frag_wgmma_gemm"}) {
      const kernels::KernelFamily& f = kernels::find_family(name);
      if (f.min_sm > sm) continue;
      const bool gemv = std::string(name).find("gemv") != std::string::npos;
      const kernels::Shape s = f.shape({gemv ? 1 : 2048, 4096, 4096, f.name == "f16_gemm" ? 4096 : 128});
      for (const kernels::Point& p : f.default_points(s)) {
        if (!f.shape_constraint(p, s).empty()) continue;
        INFO(name << " " << kernels::point_key(p) << " on sm_" << sm);
        const RooflineEstimate e = estimate_point(f, p, s, sm);
        CHECK(e.seconds >= e.bytes / (peak.dram_gbps * 1e9));
        CHECK(e.seconds >= e.flops / (std::max({peak.tensor_tflops, peak.wgmma_tflops, peak.fp32_tflops}) * 1e12));
        CHECK(e.bytes >= 4096.0 * 4096 / 2);  // at least the INT4 weights
        // One token reads the whole matrix for 2 flops a weight: memory-bound; 2048 tokens are compute-bound.
        CHECK(e.bound == (gemv ? "memory" : "compute"));
      }
    }
  }
  CHECK_THROWS_WITH(gpu_peaks(70), Catch::Contains("sm_70"));
}

TEST_CASE("a family that issues wgmma is modelled at wgmma's rate, one that issues mma.sync at mma.sync's",
          "[tuner][roofline]") {
  // Hopper's mma.sync reaches about two thirds of its wgmma peak: a model that charged the sm_90a GEMM the
  // mma.sync rate would never rank it above the Ampere-style kernel it exists to beat.
  CHECK(gpu_peaks(90).wgmma_tflops > gpu_peaks(90).tensor_tflops);
  for (int sm : {80, 86, 89}) CHECK(gpu_peaks(sm).wgmma_tflops == 0);
  const kernels::Shape s = kernels::find_family("awq_frag_wgmma_gemm").shape({4096, 4096, 4096, 128});
  for (const char* name : {"awq_frag_wgmma_gemm", "awq_frag_gemm"}) {
    const kernels::KernelFamily& f = kernels::find_family(name);
    const kernels::Point p = f.default_points(s).front();
    GpuPeaks faster_wgmma = gpu_peaks(90);
    faster_wgmma.wgmma_tflops *= 2;
    const double base = estimate_point(f, p, s, 90, gpu_peaks(90), {}).compute_s;
    const double with = estimate_point(f, p, s, 90, faster_wgmma, {}).compute_s;
    INFO(name);
    CHECK(with == Approx(f.name == "awq_frag_wgmma_gemm" ? base / 2 : base));
  }
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

namespace {

// The model's estimate and the measured median of every ok awq_frag_gemv / awq_frag_gemm row of an H200 store
// (tests/tuner/data/README.md), the model given the H200's own fingerprint and the registers ptxas reports for
// each point on sm_90. Its calibrated constants come from other figures of the first run (roofline.h), not
// from these points.
struct Calibration {
  std::vector<double> model, measured, errors;
  std::vector<int64_t> rows;  // each point's M
  double median_error(int64_t max_rows = INT64_MAX) const {
    std::vector<double> e;
    for (size_t i = 0; i < errors.size(); ++i)
      if (rows[i] <= max_rows) e.push_back(errors[i]);
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    return n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
  }
};

Calibration calibrate(const std::string& store_file) {
  const std::string path = test::h200_fixture_for_todays_sources("roofline-h200", store_file);
  const tune::Store store(path);
  const GpuPeaks peak = gpu_peaks(store.devices().at(0).fingerprint);
  CHECK(peak.dram_gbps == Approx(4814).epsilon(0.001));  // 3201 MHz x 2 x 6016 bits
  compile::CompileService service;
  Calibration c;
  for (const tune::ResultRow& r : store.rows()) {
    if (r.status != Status::Ok) continue;
    const std::string family = r.family.substr(r.family.find('.') + 1);
    if (family != "awq_frag_gemv" && family != "awq_frag_gemm") continue;
    const kernels::KernelFamily& f = kernels::find_family(family);
    kernels::Point p;
    for (const auto& [name, value] : r.point.items()) p[name] = value.get<int64_t>();
    const kernels::Shape shape = f.shape(r.shape);
    const std::vector<compile::PointResult> compiled = service.compile(f, {p}, 90);
    REQUIRE(compiled.at(0).ok());
    std::vector<KernelResources> resources;
    for (const auto& k : compiled[0].kernels)
      resources.push_back({k.name_expression, k.resources.registers, k.resources.static_smem});
    const RooflineEstimate e = estimate_point(f, p, shape, 90, peak, resources);
    c.model.push_back(e.seconds);
    c.measured.push_back(r.stats.median);
    c.errors.push_back(std::fabs(e.seconds - r.stats.median) / r.stats.median);
    c.rows.push_back(shape["M"]);
    UNSCOPED_INFO(f.name << " " << shape_key(shape) << " " << kernels::point_key(p) << ": measured "
                         << r.stats.median * 1e6 << " us, model " << e.seconds * 1e6 << " us");
  }
  return c;
}

}  // namespace

TEST_CASE("on the H200 run's measured points the model ranks them with Spearman 0.8 or more and predicts them "
          "within a median error of 25%",
          "[tuner][roofline]") {
  const Calibration c = calibrate("h200-2026-11-26-8b-frag.sqlite");
  REQUIRE(c.model.size() == 30);
  const double rho = spearman(c.model, c.measured);
  UNSCOPED_INFO("Spearman " << rho << ", median error " << c.median_error());
  CHECK(rho >= 0.8);
  CHECK(c.median_error() <= 0.25);
}

// 13 awq_frag_gemv and 41 awq_frag_gemm points at 1 to 4096 rows, from a tune the model did not see. The model
// ranks them all, and times the decode rows (M <= 16) as it did the first run's. From 64 rows it is optimistic,
// 1.1-4.3x: it charges the mma.sync GEMM its tensor pipe's rate (660 TFLOP/s on sm_90) and no cost for the
// dequant the kernel repeats for every 32 or 64 rows, while the kernel never passed 250 TFLOP/s. That bias is
// held here as it stands, so a change to the model that moves it shows.
TEST_CASE("on the second H200 run's tuned points the model ranks them with Spearman 0.8 or more and times the "
          "decode rows within a median error of 25%",
          "[tuner][roofline]") {
  const Calibration c = calibrate("h200-2026-11-27-8b-tune.sqlite");
  REQUIRE(c.model.size() == 54);
  const double rho = spearman(c.model, c.measured);
  std::printf("second H200 run: %zu points, Spearman %.3f, median error %.3f (M <= 16: %.3f)\n", c.model.size(), rho,
              c.median_error(), c.median_error(16));
  UNSCOPED_INFO("Spearman " << rho << ", median error " << c.median_error() << ", at M <= 16 " << c.median_error(16));
  CHECK(rho >= 0.8);
  CHECK(c.median_error(16) <= 0.25);
  for (size_t i = 0; i < c.model.size(); ++i)
    if (c.rows[i] >= 64) {
      INFO("point " << i << ": M = " << c.rows[i] << ", measured " << c.measured[i] * 1e6 << " us, model "
                    << c.model[i] * 1e6 << " us");
      CHECK(c.model[i] <= 1.0 * c.measured[i]);
      CHECK(c.model[i] * 4.5 >= c.measured[i]);
    }
}

// The second run's q8_0_frag_gemv at M = 1 on the 30B-A3B attention shapes, at the default point (copied into
// tests/tuner/data/h200-2026-11-27-step.json from the run's report). The generic bytes in flight per warp,
// fitted on INT4 points, put them at 1.6-2.2x the measured times; with an INT8 tile's twice-larger loads
// stated, at 1.13-1.36x. What is left is pessimism on the smallest matrices (1 and 2 MB), where the 7.7 us
// launch cost calibrated on cuBLASLt is most of the time: held at 1.4x here.
TEST_CASE("the model times the second H200 run's INT8 frag GEMV rows within 1.4x", "[tuner][roofline]") {
  std::ifstream in(source_root() + "/tests/tuner/data/h200-2026-11-27-step.json");
  REQUIRE(in);
  const nlohmann::json fx = nlohmann::json::parse(in);
  const std::string path = test::h200_fixture_for_todays_sources("roofline-h200-q8", "h200-2026-11-27-8b-tune.sqlite");
  const GpuPeaks peak = gpu_peaks(tune::Store(path).devices().at(0).fingerprint);
  const kernels::KernelFamily& f = kernels::find_family("q8_0_frag_gemv");
  compile::CompileService service;
  int rows = 0;
  for (const nlohmann::json& k : fx.at("moe_30b_a3b_8_layers").at("kernels")) {
    const kernels::Shape shape = f.shape({1, k.at("N").get<int64_t>(), k.at("K").get<int64_t>(), k.at("G").get<int64_t>()});
    const kernels::Point p = f.default_points(shape).at(0);
    REQUIRE(k.at("default_kernel").get<std::string>().find(kernels::point_key(p)) != std::string::npos);
    const std::vector<compile::PointResult> compiled = service.compile(f, {p}, 90);
    REQUIRE(compiled.at(0).ok());
    std::vector<KernelResources> resources;
    for (const auto& c : compiled[0].kernels) resources.push_back({c.name_expression, c.resources.registers, c.resources.static_smem});
    const double model = estimate_point(f, p, shape, 90, peak, resources).seconds;
    const double measured = k.at("default_us").get<double>() * 1e-6;
    std::printf("q8_0_frag_gemv %s: measured %.2f us, model %.2f us\n", shape_key(shape).c_str(), measured * 1e6, model * 1e6);
    INFO(shape_key(shape) << ": measured " << measured * 1e6 << " us, model " << model * 1e6 << " us");
    CHECK(model <= 1.4 * measured);
    CHECK(model >= 0.75 * measured);
    ++rows;
  }
  CHECK(rows == 4);
}

TEST_CASE("flash-decoding is modelled on the K and V rows of its context, not on the cache's capacity",
          "[tuner][roofline]") {
  // A 40,960-token cache at context 512 reads 1/80 of it: counting the buffers would predict every context at
  // the full cache's time.
  const kernels::KernelFamily& f = kernels::find_family("attention_decode");
  const kernels::Point p = f.default_point();
  const kernels::Shape short_ctx = f.shape({1, 32, 8, 128, 40960, 511}), long_ctx = f.shape({1, 32, 8, 128, 40960, 4095});
  const double kv_row = 2.0 * 8 * 128 * 2;  // K and V of one token, fp16
  const RooflineEstimate a = estimate_point(f, p, short_ctx, 90), b = estimate_point(f, p, long_ctx, 90);
  CHECK(a.bytes >= 512 * kv_row);
  CHECK(a.bytes < 1.2 * 512 * kv_row);  // q, out and the splits' partials besides
  CHECK(b.bytes - a.bytes == Approx((4096 - 512) * kv_row));
  CHECK(b.memory_s > a.memory_s);
}
