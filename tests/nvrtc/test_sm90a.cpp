// Architecture 90 compiles for sm_90a, so the Hopper kernels the emulator verifies (tests/emu/kernels/
// hopper.cu, hopper_buggy.cu) assemble with wgmma, setmaxnreg, mbarrier expect_tx and bulk copies through the
// project's NVRTC path; ptxas reports no spills and does not serialise their wgmma. So do the Hopper GEMM
// families' kernels, at every point.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "common/paths.h"
#include "device/jit/nvrtc_compiler.h"
#include "kernels_src/registry/registry.h"

using namespace qt::compile;

namespace {

std::string kernel_source(const std::string& name) {
  std::ifstream in(qt::source_root() + "/tests/emu/kernels/" + name);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  // count the point with the most registers (the largest bm, the deepest ring): where allocation is tightest.
  // (All points: `qtune static --gpu sm90 --points all`, 1.5 minutes.)
  // Every sm_90a family: the dense GEMMs of the three frag types, and the grouped MoE GEMMs (gate/up and down).
  size_t families = 0;
  for (const qt::kernels::KernelFamily* hopper : qt::kernels::all_families()) {
    if (hopper->min_sm != 90) continue;
    const qt::kernels::KernelFamily& f = *hopper;
    const std::string name = f.name;
    ++families;
    CompileRequest req;
    req.program_name = f.source;
    req.source = qt::kernels::read_family_source(f);
    std::set<std::string> kernels;
    std::vector<qt::kernels::Point> points = f.default_points();
    for (int64_t wg : {1, 2, 4}) {
      qt::kernels::Point widest;
      for (const auto& p : qt::kernels::enumerate_points(f))
        if (p.at("wg") == wg && p.at("pf") == 4 && p.at("stages") == 4 && (widest.empty() || p.at("bm") > widest.at("bm")))
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
  CHECK(families == 9);
}
