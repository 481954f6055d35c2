// Architecture 90 compiles for sm_90a, so the Hopper kernels the emulator verifies (tests/emu/kernels/
// hopper.cu, hopper_buggy.cu) assemble with wgmma, setmaxnreg, mbarrier expect_tx and bulk copies through the
// project's NVRTC path; ptxas reports no spills and does not serialise their wgmma. So do the Hopper GEMM
// families' kernels, at every point.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "device/jit/compile_cache.h"
#include "device/jit/compile_service.h"
#include "device/jit/nvrtc_compiler.h"
#include "kernels_src/registry/registry.h"
#include "tests/nvrtc/temp_dir.h"

using namespace qt::compile;

namespace {

std::string kernel_source(const std::string& name) {
  std::ifstream in(qt::source_root() + "/tests/emu/kernels/" + name);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every sm_90a GEMM family (its warpgroups are a parameter, "wg"): the dense GEMMs of the three frag types, and
// the grouped MoE GEMMs (gate/up and down). (The bulk-copy read stream, mem_read_bulk, is sm_90a too, and has no
// wgmma.)
std::vector<const qt::kernels::KernelFamily*> hopper_gemm_families() {
  std::vector<const qt::kernels::KernelFamily*> out;
  for (const qt::kernels::KernelFamily* f : qt::kernels::all_families())
    if (f->min_sm == 90 &&
        std::any_of(f->params.begin(), f->params.end(), [](const qt::kernels::Param& p) { return p.name == "wg"; }))
      out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("NVRTC targets sm_90a for architecture 90 and plain sm_NN otherwise") {
  CHECK(nvrtc_target(90) == "sm_90a");
  CHECK(nvrtc_target(80) == "sm_80");
  CHECK(nvrtc_target(89) == "sm_89");
}

TEST_CASE("the Hopper test kernels compile for sm_90a without spills or serialised wgmma") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> modules = {
      {"hopper.cu",
       {"k_wgmma_tile<64, 1, 1, 0, 0>", "k_wgmma_tile<64, 2, 2, 0, 1>", "k_wgmma_tile<256, 1, 0, 1, 0>",
        "k_wgmma_tile<120, 2, 0, 0, 1>", "k_pack_images<64, 2, 1, 0, 0>", "k_ws_gemm<64, 2, 2, 1, 0, 0, 1>",
        "k_ws_gemm<32, 3, 1, 2, 1, 1, 0>", "k_named_barrier_handoff"}},
      {"hopper_buggy.cu", {"k_bulk_overwrite_in_flight", "k_bad_desc", "k_setmaxnreg_divergent", "k_control"}},
  };
  for (const auto& [file, kernels] : modules) {
    CompileRequest req;
    req.program_name = file;
    req.source = kernel_source(file);
    req.name_expressions = kernels;
    req.sm = 90;
    const CompileOutput out = nvrtc_compile(req);
    INFO(file << ":\n" << out.log);
    CHECK(out.log.find("sm_90a") != std::string::npos);
    CHECK(out.log.find("serialized") == std::string::npos);
    for (const std::string& k : kernels) {
      INFO(k);
      const KernelResources& r = find_kernel(out.resources, out.lowered_names.at(k));
      CHECK(r.arch == 90);
      CHECK_FALSE(r.spills());
      CHECK(r.registers > 0);
    }
  }
}

TEST_CASE("the Hopper GEMM families compile their widest points for sm_90a with their wgmma asynchronous and no spills") {
  // ptxas serialises wgmma (warning C7515) when a register a wgmma in flight reads can be written before its
  // wait: the kernel would run, slowly, with nothing else telling. The default points, and for each warpgroup
  // count, k-steps in flight and weight ring the point with the most registers (the largest bm, the deepest ring): where
  // allocation is tightest.
  // (All points: `qtune static --gpu sm90 --points all`, 1.5 minutes.)
  const std::vector<const qt::kernels::KernelFamily*> families = hopper_gemm_families();
  for (const qt::kernels::KernelFamily* hopper : families) {
    const qt::kernels::KernelFamily& f = *hopper;
    const std::string name = f.name;
    CompileRequest req;
    req.program_name = f.source;
    req.source = qt::kernels::read_family_source(f);
    std::set<std::string> kernels;
    std::vector<qt::kernels::Point> points = f.default_points();
    // kif = 2 keeps a k-step's wgmmas in flight while the next A is written; pf = 0 takes the weights' ring off
    // the registers (the shared ring's widest point at kif = 1).
    for (int64_t wg : {1, 2, 4})
      for (const auto& [kif, pf] : {std::pair<int64_t, int64_t>{1, 4}, {2, 4}, {1, 0}}) {
        qt::kernels::Point widest;
        for (const auto& p : qt::kernels::enumerate_points(f))
          if (p.at("wg") == wg && p.at("pf") == pf && p.at("stages") == 4 && p.at("kif") == kif &&
              (widest.empty() || p.at("bm") > widest.at("bm")))
            widest = p;
        REQUIRE_FALSE(widest.empty());
        points.push_back(widest);
      }
    for (const auto& p : points)
      for (const std::string& k : f.kernels(p)) kernels.insert(k);
    req.name_expressions.assign(kernels.begin(), kernels.end());
    req.sm = 90;
    const CompileOutput out = nvrtc_compile(req);
    INFO(name << ":\n" << out.log);
    CHECK(out.log.find("serialized") == std::string::npos);
    CHECK(out.log.find("C7515") == std::string::npos);
    for (const std::string& k : kernels) {
      INFO(k);
      const KernelResources& r = find_kernel(out.resources, out.lowered_names.at(k));
      CHECK(r.arch == 90);
      CHECK_FALSE(r.spills());
    }
  }
  CHECK(families.size() == 9);
}

TEST_CASE("the awq_frag_gemv points the H200 tune lost compile for sm_90a with a ptxas entry even from a cache entry without one") {
  // The H200 tune (2026-11-27) failed these two programs in every job with "ptxas report has no entry": its
  // compile cache held them without their kernel's resources, and every later point with the same kernel
  // (they differ in split only) read the entry back. Such an entry is a miss now, and is never written.
  const qt::kernels::KernelFamily& f = qt::kernels::find_family("awq_frag_gemv");
  const std::vector<qt::kernels::Point> points = {
      qt::kernels::parse_point(f, "bk=32,pf=1,split=16,stages=2,tn=1,warps=1"),
      qt::kernels::parse_point(f, "bk=32,pf=1,split=16,stages=2,tn=1,warps=2"),
      qt::kernels::parse_point(f, "bk=32,pf=1,split=8,stages=2,tn=1,warps=1")};
  qt::test::TempDir dir("nvrtc-sm90-frag-gemv");
  ServiceOptions opt;
  opt.cache_dir = dir.str();
  opt.threads = 1;
  CompileService service(opt);
  auto require_reports = [&](const std::vector<PointResult>& results) {
    REQUIRE(results.size() == points.size());
    for (const PointResult& r : results) {
      INFO(qt::kernels::point_key(r.point) << ": " << r.error);
      REQUIRE(r.ok());
      REQUIRE(r.kernels.size() == 1);
      CHECK(r.kernels[0].resources.arch == 90);
      CHECK(r.kernels[0].resources.registers > 0);
    }
  };
  require_reports(service.compile(f, points, 90));
  // Each program's cache entry as the H200's was: the CUBIN and its names, no resources.
  for (const qt::kernels::Point& p : {points[0], points[1]}) {
    const std::filesystem::path meta = dir.path() / (cache_key(service.request_for(f, p, 90)) + ".json");
    REQUIRE(std::filesystem::exists(meta));
    nlohmann::json j = nlohmann::json::parse(std::ifstream(meta));
    j["resources"] = nlohmann::json::array();
    std::ofstream(meta, std::ios::trunc) << j.dump();
  }
  require_reports(service.compile(f, points, 90));
  bool hit = false;
  service.compile_cached(service.request_for(f, points[0], 90), &hit);
  CHECK(hit);  // the entry was repaired
}

TEST_CASE("every Hopper GEMM's first default takes its weights through the shared ring, and a report times the "
          "register ring the H200 runs measured beside it") {
  // The register ring (pf > 0) waits out a DRAM round trip every k-step (frag::wgmma_weight_ring_param, from the
  // sm_90 machine code and the third H200 run's rows), so no default leads with it; but the runs timed it, so the
  // first default's one-parameter neighbour on it is timed in every report, and the next run reads the two side
  // by side. Dense GEMMs at 1,024 rows; the grouped ones where their small and their large point lead.
  const std::vector<const qt::kernels::KernelFamily*> families = hopper_gemm_families();
  for (const qt::kernels::KernelFamily* hopper : families) {
    // The probe shape with its rows (M) or tokens (T) set.
    auto with = [&](const std::string& dim, int64_t value) {
      qt::kernels::Shape s = hopper->probe_shape;
      const auto at = std::find(s.names.begin(), s.names.end(), dim);
      REQUIRE(at != s.names.end());
      s.values[size_t(at - s.names.begin())] = value;
      return s;
    };
    const bool dense = std::count(hopper->dims.begin(), hopper->dims.end(), "M") > 0;
    const std::vector<qt::kernels::Shape> shapes =
        dense ? std::vector<qt::kernels::Shape>{with("M", 1024)}
              : std::vector<qt::kernels::Shape>{with("T", 64), with("T", 4096)};
    for (const qt::kernels::Shape& shape : shapes) {
      const std::vector<qt::kernels::Point> defaults = hopper->default_points(shape);
      REQUIRE_FALSE(defaults.empty());
      const qt::kernels::Point& first = defaults.front();
      INFO(hopper->name << " at " << qt::kernels::shape_key(shape) << ": " << qt::kernels::point_key(first));
      CHECK(first.at("pf") == 0);
      bool register_twin = false;
      for (const qt::kernels::Neighbour& n : qt::kernels::one_parameter_neighbours(*hopper, first, shape))
        register_twin = register_twin || (n.param == "pf" && n.point.at("pf") == 2);
      CHECK(register_twin);
    }
  }
  CHECK(families.size() == 9);
}
