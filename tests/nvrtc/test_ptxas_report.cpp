// ptxas resource reports as NVRTC, nvcc and standalone ptxas print them (logs captured from CUDA 13.0.88 in
// data/), plus a log produced live by NVRTC for a kernel forced to spill.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "device/jit/nvrtc_compiler.h"
#include "device/arch/ptxas_report.h"
#include "common/paths.h"

using namespace qt::compile;

namespace {
std::string data(const std::string& name) {
  std::ifstream in(qt::source_root() + "/tests/nvrtc/data/" + name);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("NVRTC log with two kernels gives each its registers, barriers, smem and cmem") {
  const auto r = parse_ptxas_log(data("nvrtc_gemv_reduce_sm86.log"));
  REQUIRE(r.size() == 2);
  const auto& reduce = find_kernel(r, "_Z24awq_splitk_reduce_kernelILi256EEvPKfP6__halfii");
  CHECK(reduce.arch == 86);
  CHECK(reduce.registers == 36);
  CHECK(reduce.barriers == 0);
  CHECK(reduce.static_smem == 0);
  CHECK(reduce.cmem0 == 376);
  CHECK_FALSE(reduce.spills());
  const auto& gemv = find_kernel(r, "_Z15awq_gemv_kernelILi4ELi2ELi4EEvPK6__halfPKjS4_S2_PS0_Pfiiii");
  CHECK(gemv.registers == 124);
  CHECK(gemv.barriers == 1);
  CHECK(gemv.static_smem == 8192);
  CHECK(gemv.cmem0 == 416);
  CHECK(gemv.stack_frame == 0);
}

TEST_CASE("nvcc -Xptxas -v log of a spilling kernel reports stack and spill bytes") {
  const auto r = parse_ptxas_log(data("nvcc_spill_sm80.log"));
  REQUIRE(r.size() == 1);
  CHECK(r[0].function == "_Z12spill_kernelPKfPfi");
  CHECK(r[0].arch == 80);
  CHECK(r[0].registers == 24);
  CHECK(r[0].stack_frame == 448);
  CHECK(r[0].spill_stores == 504);
  CHECK(r[0].spill_loads == 572);
  CHECK(r[0].static_smem == 512);
  CHECK(r[0].cmem0 == 372);
  CHECK(r[0].spills());
}

TEST_CASE("standalone ptxas sm_90 log without the 'ptxas .' prefix and without cmem parses") {
  const auto r = parse_ptxas_log(data("ptxas_spill_sm90.log"));
  REQUIRE(r.size() == 1);
  CHECK(r[0].arch == 90);
  CHECK(r[0].registers == 24);
  CHECK(r[0].stack_frame == 688);
  CHECK(r[0].spill_stores == 1024);
  CHECK(r[0].spill_loads == 1032);
  CHECK(r[0].cmem0 == 0);
}

TEST_CASE("entries without a register line are dropped and unknown kernels are an error") {
  const std::string log =
      "ptxas info    : Compiling entry function 'a' for 'sm_80'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "garbage line\n";
  CHECK(parse_ptxas_log(log).empty());
  CHECK(parse_ptxas_log("").empty());
  CHECK_THROWS_AS(find_kernel({}, "missing"), qt::Error);
}

TEST_CASE("NVRTC reports the spills that -maxrregcount forces, live") {
  CompileRequest req;
  req.program_name = "spill.cu";
  req.source = data("spill_kernel.cu");
  req.name_expressions = {"spill_kernel"};
  req.sm = 80;
  req.options = {"-maxrregcount=24"};
  const CompileOutput out = nvrtc_compile(req);
  const auto& k = find_kernel(out.resources, out.lowered_names.at("spill_kernel"));
  CHECK(k.registers <= 24);
  CHECK(k.spills());
  CHECK(k.static_smem == 512);
  CHECK(k.barriers == 1);
}
