// The compile service over the registered families: every default point compiles for every target with
// zero spills, spilling points are pruned, identical code is merged, errors stay per point.
#include <catch2/catch.hpp>

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <set>

#include "common/error.h"
#include "kernels_src/registry/registry.h"
#include "tests/nvrtc/temp_dir.h"
#include "device/jit/compile_service.h"
#include "device/jit/cubin_identity.h"
#include "common/paths.h"

using namespace qt::compile;
using qt::kernels::KernelFamily;
using qt::kernels::Point;

namespace {

// Default points are compiled by several tests: share a cache inside the build tree.
CompileService shared_service() {
  ServiceOptions opt;
  opt.cache_dir = qt::binary_root() + "/nvrtc-test-cache";
  return CompileService(opt);
}

// Every registered device family's default points compiled for the architectures in `sms` (those the family
// supports), each with zero spills and a resident block.
void check_default_points_compile(std::initializer_list<int> sms) {
  CompileService service = shared_service();
  for (const KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host()) continue;  // host families are compiled into the binary, not by NVRTC
    for (int sm : sms) {
      if (sm < f->min_sm) continue;
      const auto results = service.compile(*f, f->default_points(), sm);
      REQUIRE(results.size() == f->default_points().size());
      for (const auto& r : results) {
        INFO(f->name << " " << qt::kernels::point_key(r.point) << " sm_" << sm);
        REQUIRE(r.error == "");
        CHECK(r.pruned == "");
        REQUIRE_FALSE(r.kernels.empty());
        for (const auto& k : r.kernels) {
          INFO(k.name_expression);
          CHECK(k.resources.spill_stores == 0);
          CHECK(k.resources.spill_loads == 0);
          CHECK(k.resources.stack_frame == 0);
          CHECK(k.resources.registers > 0);
          CHECK(k.resources.registers <= 255);
          CHECK(k.block_threads > 0);
          CHECK(k.occupancy.blocks_per_sm >= 1);
          CHECK(k.lowered_name.rfind("_Z", 0) == 0);
        }
        CHECK(r.cubin);
        CHECK(r.cubin_sha256 == cubin_digest(*r.cubin));
      }
    }
  }
}

}  // namespace

// Two cases, so that CTest runs the halves side by side: from a fresh clone (no compile cache) the five
// architectures took 677 s in one case on a 2-core VM, against the 900 s timeout.
TEST_CASE("every family's default points compile for sm_75, sm_80 and sm_86 with zero spills") {
  check_default_points_compile({75, 80, 86});
}

TEST_CASE("every family's default points compile for sm_89 and sm_90 with zero spills") {
  check_default_points_compile({89, 90});
}

TEST_CASE("a family that needs sm_80 refuses sm_75") {
  CompileService service = shared_service();
  const KernelFamily& gemm = qt::kernels::find_family("awq_gemm");
  CHECK_THROWS_AS(service.compile(gemm, gemm.default_points(), 75), qt::Error);
}

TEST_CASE("points that differ only in launch geometry share one program and are marked as the same code") {
  CompileService service = shared_service();
  const KernelFamily& gemv = qt::kernels::find_family("awq_gemv");
  Point a = gemv.default_points()[1];  // split_k = 4
  Point b = a;
  b["split_k"] = 2;
  const auto r = service.compile(gemv, {a, b}, 86);
  REQUIRE(r[0].ok());
  REQUIRE(r[1].ok());
  CHECK(r[0].cubin_sha256 == r[1].cubin_sha256);
  CHECK(r[0].same_code_as == "");
  CHECK(r[1].same_code_as == qt::kernels::point_key(a));
}

TEST_CASE("identical machine code under different kernel names has one code digest") {
  CompileRequest req;
  req.program_name = "same.cu";
  req.source = R"(
#include "kernels_src/common/qt_cuda.h"
template <int A> __global__ void same_kernel(float* p) { p[threadIdx.x] = 1.0f; }
template <int A> __global__ void uses_kernel(float* p) { p[threadIdx.x] = float(A); }
)";
  req.sm = 86;
  auto compile_one = [&](const std::string& expr) {
    CompileRequest r = req;
    r.name_expressions = {expr};
    return nvrtc_compile(r).cubin;
  };
  const auto s1 = compile_one("same_kernel<1>"), s2 = compile_one("same_kernel<2>");
  const auto u1 = compile_one("uses_kernel<1>"), u2 = compile_one("uses_kernel<2>");
  CHECK(cubin_digest(s1) != cubin_digest(s2));  // the mangled names differ
  CHECK(code_digest(s1) == code_digest(s2));
  CHECK(code_digest(u1) != code_digest(u2));
  CHECK(code_digest(s1) == code_digest(u1));  // 1.0f either way: same code under another template name
  CHECK_THROWS_AS(code_digest(std::vector<uint8_t>(100, 0)), qt::Error);
  std::vector<uint8_t> truncated(s1.begin(), s1.begin() + 80);
  CHECK_THROWS_AS(code_digest(truncated), qt::Error);
  // A section whose offset + size wraps past 2^64 back into the file is refused, not read out of bounds.
  std::vector<uint8_t> wrapped = s1;
  Elf64_Ehdr eh;
  std::memcpy(&eh, wrapped.data(), sizeof eh);
  REQUIRE(eh.e_shnum > 1);
  Elf64_Shdr sh;
  const size_t at = size_t(eh.e_shoff) + size_t(eh.e_shnum - 1) * sizeof sh;
  std::memcpy(&sh, wrapped.data() + at, sizeof sh);
  sh.sh_type = SHT_PROGBITS;
  sh.sh_offset = UINT64_MAX - 15;
  sh.sh_size = 32;
  std::memcpy(wrapped.data() + at, &sh, sizeof sh);
  CHECK_THROWS_AS(code_digest(wrapped), qt::Error);
}

TEST_CASE("a point whose kernel spills is pruned with the spill size") {
  // A one-point family around a kernel that cannot fit 24 registers (tests/nvrtc/data/spill_kernel.cu).
  KernelFamily f;
  f.name = "spill_test";
  f.source = "../tests/nvrtc/data/spill_kernel.cu";
  f.params = {{"unused", {1}, 1, ""}};
  f.kernels = [](const Point&) { return std::vector<std::string>{"spill_kernel"}; };
  f.plan = [](const Point&, const qt::kernels::Shape&) {
    qt::kernels::LaunchPlan p;
    qt::kernels::Launch l;
    l.kernel = "spill_kernel";
    l.block.x = 128;
    p.launches.push_back(l);
    return p;
  };
  qt::test::TempDir dir("nvrtc-prune");
  ServiceOptions opt;
  opt.cache_dir = dir.str();
  CompileService plain(opt);
  auto r = plain.compile(f, {f.default_point()}, 80);
  REQUIRE(r[0].ok());
  CHECK(r[0].pruned == "");
  opt.extra_options = {"-maxrregcount=24"};
  CompileService squeezed(opt);
  r = squeezed.compile(f, {f.default_point()}, 80);
  REQUIRE(r[0].ok());
  CHECK(r[0].pruned.find("spill_kernel spills") != std::string::npos);
  CHECK(r[0].kernels[0].resources.spills());
  CHECK(r[0].kernels[0].occupancy.blocks_per_sm == 16);  // 24 registers, 4 warps: 2048 threads / 128
}

TEST_CASE("a compile failure is recorded for its point, not thrown") {
  qt::test::TempDir dir("nvrtc-fail");
  ServiceOptions opt;
  opt.cache_dir = dir.str();
  opt.extra_options = {"-DAWQ_BROKEN=1", "--no-such-nvrtc-option"};
  CompileService service(opt);
  const KernelFamily& dq = qt::kernels::find_family("awq_dequant");
  const auto r = service.compile(dq, dq.default_points(), 80);
  REQUIRE(r.size() == 1);
  CHECK_FALSE(r[0].ok());
  CHECK(r[0].error.find("awq/awq_dequant.cuh") != std::string::npos);
}

TEST_CASE("every point of every space passes its family's own validation") {
  for (const KernelFamily* f : qt::kernels::all_families()) {
    const auto pts = qt::kernels::enumerate_points(*f);
    CHECK(pts.size() >= f->default_points().size());
    std::set<std::string> keys;
    for (const auto& p : pts) {
      qt::kernels::validate_point(*f, p);
      keys.insert(qt::kernels::point_key(p));
      CHECK(f->shape_constraint(p, f->probe_shape) == "");
    }
    CHECK(keys.size() == pts.size());
    for (const auto& d : f->default_points()) CHECK(keys.count(qt::kernels::point_key(d)) == 1);
  }
  CHECK_THROWS_AS(qt::kernels::find_family("nope"), qt::Error);
  const KernelFamily& gemm = qt::kernels::find_family("awq_gemm");
  CHECK_THROWS_AS(qt::kernels::parse_point(gemm, "bm=48"), qt::Error);
  CHECK_THROWS_AS(qt::kernels::parse_point(gemm, "tile=16"), qt::Error);
  CHECK(qt::kernels::parse_point(gemm, "bm=64,bn=128")["bm"] == 64);
  CHECK_THROWS_WITH(qt::kernels::parse_point(gemm, "bm=64,bm=128"), Catch::Contains("gives bm twice"));
}
