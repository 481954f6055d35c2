// qtune profile beyond the emulator: --device cuda runs a point once for Nsight Compute to read (scripts/gpu/run.sh's
// profile phase), --sass-out writes the point's machine code, and every line the GPU run profiles is a point
// qtune profile accepts, so a kernel change that breaks one fails in CI rather than on the GPU.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/paths.h"
#include "kernels_src/registry/registry.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"

namespace {

using Run = qt::test::QtuneRun;
// The driver pointed at nothing: what a machine without a GPU (CI's) sees, also where a GPU is present.
const std::string kNoGpu = "QTUNE_LIBCUDA=/nonexistent/libcuda.so.1";

struct Target {
  std::string name, family, point, shape;
};

std::vector<Target> read_targets(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<Target> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Target t;
    ls >> t.name >> t.family >> t.point >> t.shape;
    INFO(line);
    REQUIRE(!t.shape.empty());
    std::string extra;
    CHECK(!(ls >> extra));
    out.push_back(t);
  }
  return out;
}

}  // namespace

TEST_CASE("every line of the GPU run's profile lists is a point qtune profile runs: only the GPU is missing here",
          "[tuner][profile][cli]") {
  namespace fs = std::filesystem;
  int files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(qt::source_root() + "/scripts/gpu/profile")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".txt") continue;
    INFO(name);
    REQUIRE(name.rfind("sm", 0) == 0);
    const std::vector<Target> targets = read_targets(e.path().string());
    CHECK(targets.size() >= 3);
    for (const Target& t : targets) {
      std::string args = "profile --device cuda --gpu " + e.path().stem().string() + " --family " + t.family +
                         " --shape " + t.shape;
      if (t.point != "default") args += " --point '" + t.point + "'";
      const Run run = qt::test::run_qtune(args, kNoGpu);
      INFO(t.name << ": qtune " << args << "\n" << run.out);
      // Exit 3 names the missing driver; a bad family, point or shape would be exit 2 before it.
      CHECK(run.rc == 3);
      CHECK(run.out.find("cuda device unavailable") != std::string::npos);
    }
    ++files;
  }
  CHECK(files >= 1);
}

TEST_CASE("qtune profile refuses what it cannot run before it looks for a GPU", "[tuner][profile][cli]") {
  struct Refusal {
    std::string args, env;
    int rc;
    const char* says;
  };
  const std::vector<Refusal> refusals = {
      {"--device gpu --family awq_frag_stream_gemv", kNoGpu, 2, "--device must be emu or cuda"},
      {"--device cuda --family awq_frag_stream_gemv --shape 1,4096,4096,100", kNoGpu, 2, "multiple of 16"},
      // A point the family refuses at the shape, and a family the architecture cannot run.
      {"--device cuda --family awq_frag_stream_gemv --shape 1,4096,4096,128 --point kw=8,tn=2", kNoGpu, 2,
       "kw x tn must be at most 8"},
      {"--device cuda --gpu sm80 --family mem_read_bulk --shape 512,1", kNoGpu, 2, "needs sm_90"},
      {"--device cuda --family awq_frag_stream_gemv --sass-out " + qt::test::tuner_scratch("profile-none", ".sass"),
       kNoGpu + " QTUNE_NVDISASM=/nonexistent/nvdisasm", 3, "--sass-out needs nvdisasm"}};
  for (const Refusal& r : refusals) {
    const Run run = qt::test::run_qtune("profile " + r.args, r.env);
    INFO("qtune profile " << r.args << "\n" << run.out);
    CHECK(run.rc == r.rc);
    CHECK(run.out.find(r.says) != std::string::npos);
  }
}

TEST_CASE("qtune profile runs a family at its default for the shape, on the architecture it needs", "[tuner][profile][cli]") {
  // attention_decode's split count follows the context: at 4096 tokens its default is not its first listed point.
  const Run attention = qt::test::run_qtune("profile --family attention_decode --shape 1,4,1,64,256,255");
  INFO(attention.out);
  REQUIRE(attention.rc == 0);
  const qt::kernels::KernelFamily& f = qt::kernels::find_family("attention_decode");
  const qt::kernels::Shape shape = f.shape({1, 4, 1, 64, 256, 255});
  CHECK(attention.out.find(qt::kernels::point_key(f.default_points(shape).front())) != std::string::npos);
  // The TMA read stream is sm_90's: the emulator presents sm_90 for it without --gpu.
  const Run bulk = qt::test::run_qtune("profile --family mem_read_bulk --shape 102400,1");
  INFO(bulk.out);
  CHECK(bulk.rc == 0);
  CHECK(bulk.out.find("verified against the CPU reference") != std::string::npos);
}

TEST_CASE("qtune profile --sass-out writes the point's CUBIN as nvdisasm lists it, and its main loop's mix",
          "[tuner][profile][cli]") {
  // A stand-in nvdisasm that lists each kernel the CUBIN names as a five-instruction function with a three-instruction
  // loop (the point's CUBIN holds two: the shared ring's unrolled and rolled loops): what is checked is that the
  // point's own CUBIN reaches it and the launched kernel's listing reaches the file and the mix.
  const std::string fake = qt::test::tuner_scratch("fake-nvdisasm", ".sh");
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\n"
         "[ \"$1\" = -c ] || exit 9\n"
         "names=$(grep -ao '_Z[0-9A-Za-z_]*' \"$2\" | sort -u)\n"
         "[ -n \"$names\" ] || exit 8\n"
         "for name in $names; do\n"
         "printf '.text.%s:\\n' \"$name\"\n"
         "printf '        /*0000*/                   MOV R1, c[0x0][0x28] ;\\n'\n"
         "printf '.L_x_0:\\n'\n"
         "printf '        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;\\n'\n"
         "printf '        /*0020*/                   HMMA.16816.F32 R8, R4, R6, R8 ;\\n'\n"
         "printf '        /*0030*/                   BRA `(.L_x_0) ;\\n'\n"
         "printf '        /*0040*/                   EXIT ;\\n'\n"
         "done\n";
  }
  REQUIRE(::chmod(fake.c_str(), 0755) == 0);
  const std::string out = qt::test::tuner_scratch("profile-sass", ".sass");
  const Run run = qt::test::run_qtune("profile --device emu --gpu sm80 --family awq_frag_stream_gemv --shape 1,128,512,128 "
                                      "--sass-out " + out,
                                      "QTUNE_NVDISASM=" + fake);
  INFO(run.out);
  REQUIRE(run.rc == 0);
  CHECK(run.out.find("verified against the CPU reference") != std::string::npos);
  CHECK(run.out.find("SASS main loop: 3 of 5 instructions") != std::string::npos);
  std::ifstream in(out);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("// awq_frag_stream_gemv kw=4,pf=8,ring=1,split=4,tn=1 for sm_80") == 0);
  CHECK(text.str().find(".text._Z23frag_stream_gemv_kernel") != std::string::npos);
  CHECK(text.str().find("HMMA.16816.F32") != std::string::npos);
}
