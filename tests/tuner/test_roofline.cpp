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
#include "kernels_src/registry/stored_point.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"
#include "device/jit/compile_service.h"
#include "tests/tuner/h200_fixture.h"
#include "tests/tuner/measured_sources.h"
#include "tuner/static/calibration.h"
#include "tuner/static/roofline.h"
#include "tuner/store/store.h"

using namespace qt;
using namespace qt::tune;

// "family k=v,k=v (source)" as a report names a kernel, read back as a recorded point of `f` (nullopt: none).
static std::optional<kernels::Point> stored_point_of(const kernels::KernelFamily& f, const std::string& kernel) {
  const size_t begin = kernel.find(' ') + 1, end = kernel.find(' ', begin);
  return kernels::point_from_text(f, kernel.substr(begin, end - begin));
}

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
        // One token reads the whole matrix for 2 flops a weight: memory-bound, by the bandwidth or by a chain of
        // dependent loads (the frag GEMV's latency chain), or the launch where those take less. 2048 tokens do more flops per DRAM byte than the
        // ridge, so the roofs alone make them compute-bound (what bounds them is the L2 re-reads of the weights
        // per row block, which the model charges at the loads in flight).
        if (gemv) CHECK((e.bound != "compute" && e.bound != "issue"));
        else CHECK(e.compute_s >= e.bytes / (peak.dram_gbps * 1e9));
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
  // The mma.sync kernels whose sources name wgmma without issuing it (the shared-weights GEMM includes the
  // Hopper GEMM's size header; a comment of the stream GEMV mentions it) stay on mma.sync's rate.
  const kernels::Shape s = kernels::find_family("awq_frag_wgmma_gemm").shape({4096, 4096, 4096, 128});
  for (const char* name : {"awq_frag_wgmma_gemm", "awq_frag_gemm", "awq_frag_smem_gemm", "awq_frag_stream_gemv"}) {
    const kernels::KernelFamily& f = kernels::find_family(name);
    const bool gemv = f.name == "awq_frag_stream_gemv";
    const kernels::Shape shape = gemv ? f.shape({16, 4096, 4096, 128}) : s;
    const kernels::Point p = f.default_points(shape).front();
    GpuPeaks faster_wgmma = gpu_peaks(90);
    faster_wgmma.wgmma_tflops *= 2;
    const double base = estimate_point(f, p, shape, 90, gpu_peaks(90), {}).compute_s;
    const double with = estimate_point(f, p, shape, 90, faster_wgmma, {}).compute_s;
    INFO(name);
    CHECK(with == Approx(f.name == "awq_frag_wgmma_gemm" ? base / 2 : base));
  }
}

// A memory-bound grid past one wave: the full waves stream at the resident warps' rate, and the last, partial wave
// with the DRAM to its few blocks, at the rate their own loads in flight reach.
TEST_CASE("a memory-bound grid a few blocks past one wave costs its tail's blocks, not a second wave's time",
          "[tuner][roofline]") {
  // The stream GEMV's shared-ring default on sm_86 (82 SMs) at 156 registers: 3 blocks of 4 warps an SM, 246 at
  // once. Each 64-column tile is split 4 ways along K: N = 3904 is 244 blocks (one wave), 4096 is 256 (one and
  // 10 blocks), 7872 is 492 (two full waves).
  const kernels::KernelFamily& f = kernels::find_family("awq_frag_stream_gemv");
  const kernels::Point p = f.defaults.front();
  REQUIRE(kernels::point_key(p) == "kw=4,pf=8,ring=1,split=4,tn=1");
  const std::vector<KernelResources> resources = {{f.kernels(p).front(), 156, 0, 0}};
  auto memory_us = [&](int64_t n) {
    const kernels::Shape s = f.shape({1, n, 4096, 128});
    const RooflineEstimate e = estimate_point(f, p, s, 86, gpu_peaks(86), resources);
    return e.memory_s * 1e6;
  };
  const double one = memory_us(3904), past = memory_us(4096), two = memory_us(7872);
  // A second wave's time would be about twice one (1.9x): the 10 blocks' tail costs a fraction of it.
  CHECK(past > one * 4096 / 3904);
  CHECK(past < one * 1.25);
  // Two full waves stream their bytes at the same rate as one.
  CHECK(two == Approx(one * 7872 / 3904).epsilon(0.02));
}

// The issue time (roofline.h) on a family whose loop work and instructions the test states: each SM runs its
// share of the looping blocks (rounded up), one instruction a cycle from each scheduler that has a warp.
TEST_CASE("the issue time is each SM's share of the looping blocks' instructions, one a cycle per scheduler that "
          "holds a warp", "[tuner][roofline]") {
  kernels::KernelFamily f = kernels::find_family("awq_gemm");
  const kernels::Shape s = f.shape({4096, 4096, 4096, 128});
  const kernels::Point p = f.defaults.front();  // bm=16, bn=64, bk=32, 2 warps
  REQUIRE(kernels::point_key(p) == "bk=32,bm=16,bn=64,split_k=1,stages=2,warps=2");
  const std::string kernel = f.kernels(p).front();
  const GpuPeaks& peak = gpu_peaks(90);
  const std::vector<KernelResources> resources = {{kernel, 64, 0, 1000}};
  auto issue_us = [&](double blocks, double trips) {
    f.main_loop = [=](const kernels::Point&, const kernels::Shape&, const kernels::LaunchPlan&) {
      return kernels::LoopWork{blocks, trips};
    };
    return estimate_point(f, p, s, 90, peak, resources).issue_s * 1e6;
  };
  // The family's own statement: 64 x 256 blocks of 2 warps, 128 K steps each. 125 blocks an SM, never fewer
  // than 4 warps resident.
  const RooflineEstimate own = estimate_point(f, p, s, 90, peak, resources);
  CHECK(own.issue_s * 1e6 == Approx(125.0 * 2 * 128 * 1000 / (4 * peak.clock_ghz * 1e3)));
  CHECK(own.bound == "issue");
  CHECK(own.seconds >= own.issue_s);
  // 200 blocks on 132 SMs: 2 on some SM, which sets the time.
  CHECK(issue_us(200, 10) == Approx(2.0 * 2 * 10 * 1000 / (4 * peak.clock_ghz * 1e3)));
  // 2 blocks: one an SM, 2 warps, so 2 schedulers issue.
  CHECK(issue_us(2, 10) == Approx(1.0 * 2 * 10 * 1000 / (2 * peak.clock_ghz * 1e3)));
  // No instructions read, or no loop stated: no issue time.
  CHECK(estimate_point(f, p, s, 90, peak, {{kernel, 64, 0, 0}}).issue_s == 0);
  f.main_loop = nullptr;
  CHECK(estimate_point(f, p, s, 90, peak, resources).issue_s == 0);
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
      CHECK((p["bound"] != "compute" && p["bound"] != "issue"));  // the Qwen3-8B decode shapes, M = 1
    }
  }
}

namespace {

// The model against the awq_frag_gemv / awq_frag_gemm rows of an H200 store (tests/tuner/data/README.md),
// each predicted with the H200's own fingerprint and the registers ptxas reports for the point on sm_90
// (calibration.h, what qtune static --against prints). Its calibrated constants come from other figures of the
// first run (roofline.h), not from these points.
struct Fit {
  Calibration c;
  std::vector<const CalibrationPoint*> rows(int64_t lo, int64_t hi) const {
    std::vector<const CalibrationPoint*> out;
    for (const CalibrationPoint& p : c.points)
      if (p.rows() >= lo && p.rows() <= hi) out.push_back(&p);
    return out;
  }
};

Fit calibrate(const std::string& store_file) {
  const std::string path = test::h200_fixture_for_todays_sources("roofline-h200", store_file);
  compile::CompileService service;
  Fit f{calibrate_store(path, {"awq_frag_gemv", "awq_frag_gemm"}, service)};
  for (const CalibrationPoint& p : f.c.points)
    UNSCOPED_INFO(p.family << " " << shape_key(p.shape) << " " << kernels::point_key(p.point) << ": measured "
                           << p.measured_s * 1e6 << " us, model " << p.model_s * 1e6 << " us");
  return f;
}

// Every row's model/measured within [lo, hi].
void check_each_within(const std::vector<const CalibrationPoint*>& rows, double lo, double hi) {
  for (const CalibrationPoint* p : rows) {
    INFO(p->family << " " << shape_key(p->shape) << " " << kernels::point_key(p->point) << ": measured "
                   << p->measured_s * 1e6 << " us, model " << p->model_s * 1e6 << " us");
    CHECK(p->model_s <= hi * p->measured_s);
    CHECK(p->model_s >= lo * p->measured_s);
  }
}

}  // namespace

TEST_CASE("on the H200 run's measured points the model ranks them with Spearman 0.8 or more and predicts them "
          "within a median error of 25%",
          "[tuner][roofline]") {
  const Fit f = calibrate("h200-2026-11-26-8b-frag.sqlite");
  REQUIRE(f.c.points.size() == 30);
  const CalibrationFit all = fit(f.rows(0, INT64_MAX));
  UNSCOPED_INFO("Spearman " << all.spearman << ", median error " << all.median_error);
  CHECK(all.spearman >= 0.8);
  CHECK(all.median_error <= 0.25);
}

// 13 awq_frag_gemv and 41 awq_frag_gemm points at 1 to 4096 rows, from a tune the model did not see. Until the
// model charged each row block's re-read of the weights (L2 hits, at an L2 hit's latency, through the same loads
// in flight), it put the GEMM points from 64 rows at 1.1-4.3x too fast, the tensor pipe's rate being no limit
// to a kernel that never passed 250 TFLOP/s; now they are held, as the decode rows, to a median error of 25%,
// and each point to within 2x.
TEST_CASE("on the second H200 run's tuned points the model ranks them with Spearman 0.8 or more and times the "
          "decode and the prefill rows within a median error of 25%",
          "[tuner][roofline]") {
  const Fit f = calibrate("h200-2026-11-27-8b-tune.sqlite");
  REQUIRE(f.c.points.size() == 54);
  const CalibrationFit all = fit(f.rows(0, INT64_MAX)), decode = fit(f.rows(1, 16)), prefill = fit(f.rows(64, INT64_MAX));
  std::printf("second H200 run: %zu points, Spearman %.3f, median error %.3f (M <= 16: %.3f, M >= 64: %.3f)\n",
              all.n, all.spearman, all.median_error, decode.median_error, prefill.median_error);
  UNSCOPED_INFO("Spearman " << all.spearman << ", median error at M <= 16 " << decode.median_error << ", at M >= 64 "
                            << prefill.median_error);
  CHECK(all.spearman >= 0.8);
  CHECK(decode.median_error <= 0.25);
  CHECK(prefill.n == 31);
  CHECK(prefill.median_error <= 0.25);
  check_each_within(f.rows(64, INT64_MAX), 0.5, 2.0);
}

// The second run's qbench reports time every family's default point beside the tuned one, at 1 to 4096 rows
// (results/gpu-h200-2026-11-27/report-*/report.json, read as qtune static --against reads them). Held here: the
// frag linear kernel the fixture check pins (AWQ and Q8_0, GEMV and GEMM rows of both models), which the
// runtime runs; the file layout's tiled GEMMs (awq_gemm, q8_0_gemm) from 64 rows; and their grouped expert form
// (moe_gate_up.q8_0, moe_down.q8_0) from 16 tokens. While the model charged them their memory side alone, it put
// the tiled GEMMs at a median of 0.43x their measured times and the grouped ones at 0.37x: their main loops issue
// 650-1,350 instructions for 8-64 mma (the dequant into shared memory and its address arithmetic). Charged that
// issue time (roofline.h), the tiled GEMMs are within a median error of 10% (31 rows, each within 0.52-1.35x).
// The grouped ones (12 rows) move to a median of 0.45x (0.33-0.82x) and stay the model's known optimism: their
// register-bound blocks leave 3 or 4 warps a scheduler (12-16 an SM), too few to issue every cycle and hide their
// loads at once, and the model charges the larger of the issue and memory times, not a sum of stalls. Held as
// the bound it is, so that a change that moves it shows. The stage loaders of these (and f16_gemm) were rewritten after the
// run (a third to a half of the instructions a trip): their rows are predicted from the files the run measured
// (tests/tuner/data/measured-kernels/h200-2026-11-27), the rest from today's.
TEST_CASE("on the second H200 run's reports the model times the frag linear rows within a median error of 25%, the "
          "file layout's GEMV within 2x, its tiled GEMMs, charged their loops' issue time, within a median error of 25%, "
          "and states its bias on the grouped ones",
          "[tuner][roofline]") {
  test::require_frag_linear_as_measured();
  compile::CompileService service;
  std::vector<CalibrationPoint> points;
  const std::vector<std::string> rewritten = {"awq_gemm", "q8_0_gemm", "f16_gemm", "moe_gate_up.q8_0", "moe_down.q8_0"};
  std::vector<std::string> unchanged;
  for (const kernels::KernelFamily* f : kernels::all_families())
    if (std::find(rewritten.begin(), rewritten.end(), f->name) == rewritten.end()) unchanged.push_back(f->name);
  const std::vector<std::string> reports = {source_root() + "/results/gpu-h200-2026-11-27/report-qwen3-8b/report.json",
                                             source_root() + "/results/gpu-h200-2026-11-27/report-qwen3-30b-a3b/report.json"};
  for (const std::string& path : reports) {
    const Calibration c = calibrate_store(path, unchanged, service);
    points.insert(points.end(), c.points.begin(), c.points.end());
  }
  {
    // The file layout's GEMMs were rewritten since the run: their rows are predicted from the kernels it ran.
    const test::MeasuredKernelSources as_measured("h200-2026-11-27");
    for (const std::string& path : reports) {
      const Calibration r = calibrate_store(path, rewritten, service);
      points.insert(points.end(), r.points.begin(), r.points.end());
    }
  }
  std::vector<const CalibrationPoint*> frag, file_gemm, grouped;
  for (const CalibrationPoint& p : points) {
    if (p.family == "awq_frag_gemv" || p.family == "awq_frag_gemm" || p.family == "q8_0_frag_gemv" ||
        p.family == "q8_0_frag_gemm")
      frag.push_back(&p);
    if ((p.family == "awq_gemm" || p.family == "q8_0_gemm") && p.rows() >= 64) file_gemm.push_back(&p);
    if ((p.family == "moe_gate_up.q8_0" || p.family == "moe_down.q8_0") && p.shape["T"] >= 16) grouped.push_back(&p);
  }
  const CalibrationFit f = fit(frag), g = fit(file_gemm), gg = fit(grouped);
  std::printf("second H200 run's reports: frag linear %zu rows, Spearman %.3f, median error %.3f; file-layout GEMMs "
              "from 64 rows %zu, Spearman %.3f, median error %.3f, median model/measured %.2f; grouped from 16 tokens "
              "%zu, median model/measured %.2f\n",
              f.n, f.spearman, f.median_error, g.n, g.spearman, g.median_error, g.median_ratio, gg.n, gg.median_ratio);
  CHECK(f.n == 80);
  CHECK(f.spearman >= 0.8);
  CHECK(f.median_error <= 0.25);
  check_each_within(frag, 0.5, 2.0);
  CHECK(g.n == 31);
  CHECK(g.spearman >= 0.8);
  CHECK(g.median_error <= 0.25);
  check_each_within(file_gemm, 0.5, 2.0);
  CHECK(gg.n == 12);
  CHECK(gg.median_ratio >= 0.4);
  CHECK(gg.median_ratio <= 0.8);
  check_each_within(grouped, 0.3, 1.0);
  // The file layout's AWQ GEMV keeps one step's weight words in flight a warp (awq_family.cpp): with the generic
  // 1 KB a warp the model put it at 0.22x its measured 441-1409 us; stated, within 2x (pessimistic, 1.1-1.7x).
  int gemv_rows = 0;
  for (const CalibrationPoint& p : points)
    if (p.family == "awq_gemv") {
      INFO(shape_key(p.shape) << ": measured " << p.measured_s * 1e6 << " us, model " << p.model_s * 1e6 << " us");
      CHECK(p.model_s <= 2.0 * p.measured_s);
      CHECK(p.model_s * 2.0 >= p.measured_s);
      ++gemv_rows;
    }
  CHECK(gemv_rows == 9);
}

// The third run (results/gpu-h200-2026-11-29) timed the file layout's GEMMs with their rewritten loaders (a third
// to a half of the instructions a trip), on today's sources. Measured against the second run: awq_gemm 1.58x faster
// (1.29-1.62x), q8_0_gemm 1.05x (1.26-1.39x at 16 and 64 rows), the grouped gate|up 1.64x and down 1.24x. The model
// had predicted 3.23x and 1.67x for the tiled ones: it charged the old loops' issue time well, but with fewer
// instructions a trip the time each trip waits on its loads shows, and the model takes the larger of the issue and
// the memory time, not what of them fails to overlap. (Their sum puts these rows at 0.91-0.97x, the second run's
// at 1.37x: the overlap is a property of the loop, which the model does not have.) Held as the bias it is, so
// that a change that moves it shows; the tiled GEMMs' ranks are held as the second run's are.
TEST_CASE("on the third H200 run's reports the model ranks the rewritten file-layout GEMMs and states its optimism "
          "on them",
          "[tuner][roofline]") {
  compile::CompileService service;
  std::vector<CalibrationPoint> points;
  for (const char* report : {"report-qwen3-8b", "report-qwen3-30b-a3b"}) {
    const Calibration c = calibrate_store(source_root() + "/results/gpu-h200-2026-11-29/" + report + "/report.json",
                                          {"awq_gemm", "q8_0_gemm", "moe_gate_up.q8_0", "moe_down.q8_0"}, service);
    points.insert(points.end(), c.points.begin(), c.points.end());
  }
  std::vector<const CalibrationPoint*> tiled, grouped;
  for (const CalibrationPoint& p : points) {
    if ((p.family == "awq_gemm" || p.family == "q8_0_gemm") && p.rows() >= 64) tiled.push_back(&p);
    if ((p.family == "moe_gate_up.q8_0" || p.family == "moe_down.q8_0") && p.shape["T"] >= 16) grouped.push_back(&p);
  }
  const CalibrationFit g = fit(tiled), gg = fit(grouped);
  std::printf("third H200 run's reports: file-layout GEMMs from 64 rows %zu, Spearman %.3f, median model/measured %.2f; "
              "grouped from 16 tokens %zu, Spearman %.3f, median model/measured %.2f\n",
              g.n, g.spearman, g.median_ratio, gg.n, gg.spearman, gg.median_ratio);
  CHECK(g.n == 31);
  CHECK(g.spearman >= 0.8);
  CHECK(g.median_ratio >= 0.45);
  CHECK(g.median_ratio <= 0.7);
  check_each_within(tiled, 0.4, 1.6);  // pessimistic (1.1-1.5x) on the Q8_0 ones of 512 columns or 64 rows
  CHECK(gg.n == 12);
  CHECK(gg.median_ratio >= 0.45);
  CHECK(gg.median_ratio <= 0.8);
  check_each_within(grouped, 0.3, 1.1);
}

// The grouped wgmma GEMMs of the second run's 30B-A3B report ran one point (bm=64, two warpgroups, the register
// ring pf=2) at 512, 1024 and 4096 tokens, where the share of their weight loads that are re-reads grows from none
// to about 3 in 4. The model's error on them must not grow with that share: with the re-reads charged as L2 hits
// the model went from 0.67x to 0.33x of the measured time over those rows; charged at the DRAM latency
// (rereads_at_dram_latency) and counted over the routing's spread (expected_row_blocks), it stayed within
// 0.55-0.7x, a flat optimism. That optimism was the register ring's drain (frag::wgmma_weight_ring_param): a DRAM
// round trip every k-step, waited through by the blocks that have routed rows. With it the gate|up rows (128
// k-steps a block) come to 0.88-0.94x; the down rows (48 k-steps) to 1.4-1.6x, pessimistic: the short chain of a
// block overlaps more of its neighbours' prologues and stores than the model's whole waves allow. Held as the
// bounds they are.
TEST_CASE("on the second H200 run's grouped wgmma rows the model's error does not grow with the weights' re-reads, "
          "and the register ring's chain times the gate|up rows",
          "[tuner][roofline]") {
  compile::CompileService service;
  const Calibration c = calibrate_store(source_root() + "/results/gpu-h200-2026-11-27/report-qwen3-30b-a3b/report.json",
                                        {"moe_gate_up.frag.q8_0", "moe_down.frag.q8_0"}, service);
  for (const char* family : {"moe_gate_up.frag.q8_0", "moe_down.frag.q8_0"}) {
    const bool gate_up = std::string(family) == "moe_gate_up.frag.q8_0";
    double lo = 1e9, hi = 0;
    int rows = 0;
    for (const CalibrationPoint& p : c.points) {
      if (p.family != family || p.shape["T"] < 512) continue;
      INFO(family << " " << shape_key(p.shape) << " " << kernels::point_key(p.point) << ": measured "
                  << p.measured_s * 1e6 << " us, model " << p.model_s * 1e6 << " us");
      CHECK(p.point.at("bm") == 64);
      CHECK(p.point.at("wg") == 2);
      CHECK(p.point.at("pf") == 2);
      CHECK(p.bound == "latency");
      const double ratio = p.model_s / p.measured_s;
      lo = std::min(lo, ratio), hi = std::max(hi, ratio);
      ++rows;
    }
    INFO(family << ": model/measured " << lo << " to " << hi);
    CHECK(rows == 3);
    CHECK(hi / lo <= 1.3);
    CHECK(lo >= (gate_up ? 0.8 : 1.2));
    CHECK(hi <= (gate_up ? 1.1 : 1.8));
  }
}

// The third run's reports timed the dense Hopper GEMM's first default of the time (bm=64, one warpgroup, the
// register ring pf=2) at 1 to 4,096 rows: 123-128 us at K = 4,096 and 363-366 us at K = 12,288 whatever N and M
// while one wave holds the grid, and whole multiples of that per wave beyond (458.9 us at 4,096 x 4,096 and
// 4,096 rows: four waves). That is the register ring's chain, a DRAM round trip every k-step (256 and 768 of
// them), at about 0.46 us a round trip; the model counts them at its loaded latency of 0.6 us, so it is
// pessimistic by about 1.3x on every row, and ranks them by it.
TEST_CASE("the dense wgmma GEMM's register ring is timed as a DRAM round trip a k-step on the third H200 run's rows",
          "[tuner][roofline]") {
  compile::CompileService service;
  std::vector<CalibrationPoint> points;
  for (const char* report : {"report-qwen3-8b", "report-qwen3-30b-a3b"}) {
    const Calibration c = calibrate_store(source_root() + "/results/gpu-h200-2026-11-29/" + report + "/report.json",
                                          {"awq_frag_wgmma_gemm", "q8_0_frag_wgmma_gemm"}, service);
    points.insert(points.end(), c.points.begin(), c.points.end());
  }
  std::vector<const CalibrationPoint*> rows;
  for (const CalibrationPoint& p : points)
    if (!p.in_chain && p.point.at("pf") == 2) {
      INFO(p.family << " " << shape_key(p.shape) << " " << kernels::point_key(p.point) << ": measured "
                    << p.measured_s * 1e6 << " us, model " << p.model_s * 1e6 << " us, " << p.bound);
      CHECK(p.bound == "latency");
      rows.push_back(&p);
    }
  const CalibrationFit f = fit(rows);
  std::printf("third H200 run's wgmma GEMM rows (pf=2): %zu, Spearman %.3f, median model/measured %.2f\n", f.n,
              f.spearman, f.median_ratio);
  CHECK(f.n >= 40);
  CHECK(f.spearman >= 0.8);
  CHECK(f.median_ratio >= 1.15);
  CHECK(f.median_ratio <= 1.45);
  check_each_within(rows, 0.9, 1.7);
}

TEST_CASE("a report's rows timed in a chain are predicted with the in-stream launch cost, in a group of their own",
          "[tuner][roofline]") {
  // The second run's 8B report with one decode row's tuned kernel also timed in a chain (as qbench --report now
  // times M <= 16): the same point and shape, predicted with GpuPeaks::stream_launch_us per launch where the
  // launch timed alone gets launch_us.
  std::ifstream in(source_root() + "/results/gpu-h200-2026-11-27/report-qwen3-8b/report.json");
  REQUIRE(in);
  nlohmann::json report = nlohmann::json::parse(in);
  nlohmann::json* row = nullptr;
  for (nlohmann::json& k : report["kernels"])
    if (k["type"] == "AWQ_INT4" && k["M"] == 1 && !row) row = &k;
  REQUIRE(row);
  nlohmann::json tuned;
  for (const nlohmann::json& v : (*row)["variants"])
    if (v["name"] == "tuned") tuned = v;
  REQUIRE(tuned.contains("seconds"));
  nlohmann::json chained = tuned;
  chained["name"] = "tuned in a chain";
  chained["seconds"] = tuned["seconds"].get<double>() / 2;
  (*row)["variants"].push_back(chained);
  const std::string path = test::tuner_scratch("roofline-chain", ".json");
  std::ofstream(path) << report.dump();
  compile::CompileService service;
  const Calibration c = calibrate_store(path, {"awq_frag_gemv"}, service);
  const CalibrationPoint *alone = nullptr, *chain = nullptr;
  for (const CalibrationPoint& p : c.points)
    if (p.shape["N"] == (*row)["N"] && p.shape["K"] == (*row)["K"] && p.shape["M"] == 1 &&
        stored_point_of(kernels::find_family("awq_frag_gemv"), tuned["detail"].get<std::string>()) == p.point)
      (p.in_chain ? chain : alone) = &p;
  REQUIRE(alone);
  REQUIRE(chain);
  CHECK(chain->measured_s == Approx(alone->measured_s / 2));
  const GpuPeaks peak;  // the constants are the model's, whatever the GPU
  CHECK(alone->model_s - chain->model_s == Approx((peak.launch_us - peak.stream_launch_us) * 1e-6).epsilon(1e-6));
  std::remove(path.c_str());
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
    // The run's default as it ran ("q8_0_frag_gemv bk=64,...,warps=2 (default)": parameters added since take
    // the value it ran), which is today's default but for those.
    const std::optional<kernels::Point> ran = stored_point_of(f, k.at("default_kernel").get<std::string>());
    REQUIRE(ran);
    const kernels::Point& p = *ran;
    kernels::Point today = f.default_points(shape).at(0);
    today["ru"] = p.at("ru");
    REQUIRE(today == p);
    const std::vector<compile::PointResult> compiled = service.compile(f, {p}, 90);
    REQUIRE(compiled.at(0).ok());
    std::vector<KernelResources> resources;
    for (const auto& c : compiled[0].kernels) resources.push_back(model_resources(c.name_expression, c.resources));
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

TEST_CASE("qtune static --against prints the model beside every row a GPU measured, per family, and refuses a file "
          "that is neither a store nor a report",
          "[tuner][roofline][cli]") {
  const std::string store = source_root() + "/tests/tuner/data/h200-2026-11-27-8b-tune.sqlite";
  const std::string json = test::tuner_scratch("against", ".json");
  const test::QtuneRun r = test::run_qtune("static --against " + store + " --kernel awq_frag_gemv --json " + json);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("PREDICTIONS") != std::string::npos);
  CHECK(r.out.find("NVIDIA H200") != std::string::npos);
  CHECK(r.out.find("awq_frag_gemm") == std::string::npos);  // --kernel keeps one family
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j["rows"].size() == 13);
  for (const auto& row : j["rows"]) {
    CHECK(row["family"] == "awq_frag_gemv");
    CHECK(row["measured_s"].get<double>() > 0);
    CHECK(row["model_s"].get<double>() > 0);
  }
  REQUIRE(!j["fits"].empty());
  CHECK(j["fits"][0]["points"] == 13);
  CHECK(j["fits"][0]["spearman"].get<double>() > 0.5);

  // A report's kernel rows name their points in words; composite baselines (cuBLASLt) are left out.
  const test::QtuneRun rep =
      test::run_qtune("static --against " + source_root() + "/results/gpu-h200-2026-11-27/report-qwen3-8b/report.json");
  REQUIRE(rep.rc == 0);
  CHECK(rep.out.find("awq_gemv") != std::string::npos);
  CHECK(rep.out.find("cuBLASLt") == std::string::npos);

  const std::string junk = test::tuner_scratch("against-junk", ".txt");
  std::ofstream(junk) << "not a store";
  const test::QtuneRun bad = test::run_qtune("static --against " + junk);
  CHECK(bad.rc == 2);
  CHECK(bad.out.find("neither a tuning store nor a qbench report") != std::string::npos);
  const std::string broken = test::tuner_scratch("against-broken", ".json");
  std::ofstream(broken) << R"({"schema": "qtune-bench-report/1", "device": {"fingerprint": "{\"name\": \"NVIDIA H200\", \"arch\": \"sm_90\"}"}, "kernels": [1]})";
  const test::QtuneRun malformed = test::run_qtune("static --against " + broken);
  CHECK(malformed.rc == 2);
  CHECK(malformed.out.find("\"kernels\" row 0 is not an object") != std::string::npos);
  const std::string numeric_schema = test::tuner_scratch("against-schema", ".json");
  std::ofstream(numeric_schema) << R"({"schema": 5, "kernels": []})";
  const test::QtuneRun schema = test::run_qtune("static --against " + numeric_schema);
  CHECK(schema.rc == 2);
  CHECK(schema.out.find("neither a tuning store nor a qbench report") != std::string::npos);
  const test::QtuneRun gpu = test::run_qtune("static --against " + store + " --gpu sm90");
  CHECK(gpu.rc == 2);
  CHECK(gpu.out.find("--gpu does not apply to --against") != std::string::npos);
  const test::QtuneRun missing = test::run_qtune("static --against /nonexistent/store.sqlite");
  CHECK(missing.rc == 2);
  CHECK(missing.out.find("/nonexistent/store.sqlite") != std::string::npos);
}

TEST_CASE("the model charges a lookup and a KV-cache write the rows they touch, not their whole buffers",
          "[tuner][roofline]") {
  // The third H200 run timed the embedding lookup (a 151,936-row table) at 4.1 us and the q/k norm + RoPE + KV
  // write (a 40,960-token cache) at 7.6 us. Counted by their buffers, the model had them at 56,000 and 10,000 us.
  compile::CompileService service;
  const Calibration c = calibrate_store(source_root() + "/results/gpu-h200-2026-11-29/qtune-cache.sqlite",
                                        {"embedding.f16", "qk_norm_rope_kv"}, service);
  int rows = 0;
  for (const CalibrationPoint& p : c.points) {
    INFO(p.family << " " << kernels::shape_key(p.shape) << ": measured " << p.measured_s * 1e6 << " us, model "
                  << p.model_s * 1e6 << " us");
    // Both are a launch and a few KB: the model's launch cost, fitted on cuBLASLt (7.7 us), is all of it.
    CHECK(p.bound == "launch");
    CHECK(p.model_s <= 2.5 * p.measured_s);
    CHECK(p.model_s >= p.measured_s);
    ++rows;
  }
  CHECK(rows == 4);
}

TEST_CASE("the frag GEMV's latency chain times the third H200 run's GEMV rows, INT4 and INT8, within a median "
          "error of 15%", "[tuner][roofline]") {
  // Each block's chain of dependent waits (a DRAM round trip an A stage, one an INT4 group for its zeros, one a
  // split-K output a thread): the generic loads-in-flight figure alone had these rows at Spearman 0.81 and a
  // median error of 27% (INT4), 0.60 and 29% (INT8).
  compile::CompileService service;
  const Calibration c = calibrate_store(source_root() + "/results/gpu-h200-2026-11-29/report-qwen3-8b/report.json",
                                        {"awq_frag_gemv", "q8_0_frag_gemv"}, service);
  for (const char* family : {"awq_frag_gemv", "q8_0_frag_gemv"}) {
    std::vector<const CalibrationPoint*> rows;
    int chain_bound = 0;
    for (const CalibrationPoint& p : c.points)
      if (p.family == family && !p.in_chain) {
        rows.push_back(&p);
        // Recorded before zpf and ru: read as the kernel that ran.
        CHECK(p.point.at("zpf") == 0);
        CHECK(p.point.at("ru") == 1);
        chain_bound += p.bound == "latency";
      }
    const CalibrationFit f = fit(rows);
    INFO(family << ": " << f.n << " rows, Spearman " << f.spearman << ", median error " << f.median_error
                << ", median model/measured " << f.median_ratio);
    CHECK(f.n >= 5);
    CHECK(f.spearman >= 0.75);
    CHECK(f.median_error <= 0.15);
    if (std::string(family) == "awq_frag_gemv") CHECK(chain_bound * 2 >= int(f.n));
  }
}

TEST_CASE("the latency chain prices the zeros loaded a group ahead and the split-K outputs summed at once",
          "[tuner][roofline]") {
  for (const char* name : {"awq_frag_gemv", "q8_0_frag_gemv"}) {
    const kernels::KernelFamily& f = kernels::find_family(name);
    const bool int4 = std::string(name) == "awq_frag_gemv";
    const kernels::Shape one = f.shape({1, 4096, 4096, int4 ? 128 : 32}), sixteen = f.shape({16, 4096, 4096, int4 ? 128 : 32});
    kernels::Point p = f.default_points(one).at(0);
    p["bk"] = 32;  // every group size here is a multiple
    auto chain = [&](const kernels::Point& q, const kernels::Shape& s) { return f.latency_chain(q, s).dram_rounds; };
    kernels::Point ahead = p;
    ahead["zpf"] = 1;
    INFO(name);
    // INT4 waits for each group's zeros before its first stage; INT8 reads its scales only at the group's end.
    const int64_t groups_a_block = (4096 / (int4 ? 128 : 32) + p.at("split") - 1) / p.at("split");
    CHECK(chain(p, one) - chain(ahead, one) == (int4 ? groups_a_block : 0));
    // 16 rows of a 64-column tile per warp are 32 outputs a thread: 8 round trips summed four at once, not 32.
    kernels::Point one_at_a_time = p;
    one_at_a_time["ru"] = 1;
    CHECK(chain(one_at_a_time, sixteen) - chain(p, sixteen) == 32 - 8);
    CHECK(estimate_point(f, p, sixteen, 90).seconds < estimate_point(f, one_at_a_time, sixteen, 90).seconds);
  }
}

TEST_CASE("the stream GEMVs' register rings are timed as three loads a lane in flight: fitted on the AWQ stream "
          "rows, the stream rows it was not fitted on within a median error of 15-25%", "[tuner][roofline]") {
  // The cap was read off awq_frag_stream_gemv's report rows (the ring's whole depth had them at a median error of
  // 32%, every row optimistic); INT8's stream GEMV, gate|up's tuned point and the routed MoE gate|up GEMV were left
  // out of that reading and are held here (before the cap: 22%, 43% and 36%).
  compile::CompileService service;
  const std::string run = source_root() + "/results/gpu-h200-2026-11-29";
  const Calibration report =
      calibrate_store(run + "/report-qwen3-8b/report.json", {"awq_frag_stream_gemv", "q8_0_frag_stream_gemv"}, service);
  const Calibration store =
      calibrate_store(run + "/qtune-cache.sqlite", {"awq_frag_gate_up_swiglu", "moe_gate_up_gemv.frag.q8_0"}, service);
  struct Held {
    const Calibration* c;
    const char* family;
    size_t min_rows;
    double max_error;
  };
  for (const Held& h : {Held{&report, "awq_frag_stream_gemv", 10, 0.20}, Held{&report, "q8_0_frag_stream_gemv", 5, 0.15},
                        Held{&store, "awq_frag_gate_up_swiglu", 2, 0.25}, Held{&store, "moe_gate_up_gemv.frag.q8_0", 3, 0.15}}) {
    std::vector<const CalibrationPoint*> rows;
    for (const CalibrationPoint& p : h.c->points)
      if (p.family == h.family && !p.in_chain) rows.push_back(&p);
    const CalibrationFit f = fit(rows);
    INFO(h.family << ": " << f.n << " rows, Spearman " << f.spearman << ", median error " << f.median_error
                  << ", median model/measured " << f.median_ratio);
    CHECK(f.n >= h.min_rows);
    CHECK(f.median_error <= h.max_error);
    if (f.n >= 5) CHECK(f.spearman >= 0.85);
  }
  // The cap itself: a deeper ring than three loads a lane adds nothing the model counts, a shallower one is counted.
  const kernels::KernelFamily& awq = kernels::find_family("awq_frag_stream_gemv");
  const kernels::KernelFamily& q8 = kernels::find_family("q8_0_frag_stream_gemv");
  const kernels::Point deep{{"kw", 4}, {"pf", 8}, {"split", 4}, {"tn", 1}}, shallow{{"kw", 4}, {"pf", 2}, {"split", 4}, {"tn", 1}};
  CHECK(awq.bytes_in_flight_per_warp(deep) == 3 * 512);
  CHECK(awq.bytes_in_flight_per_warp(shallow) == 2 * 512);
  CHECK(q8.bytes_in_flight_per_warp(shallow) == 3 * 512);
}
