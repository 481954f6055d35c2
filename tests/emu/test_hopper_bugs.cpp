// The deliberately wrong sm_90a kernels (tests/emu/bug_cases.h) once, under the sanitizers in CI: each is
// stopped with its report, naming the kernel, the block, the thread and the source line.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/emu/bug_cases.h"

using namespace qt;

TEST_CASE("each Hopper misuse is reported with its class and source line") {
  auto& dev = emu::test::sm90_device();
  for (const emu::test::BugCase& c : emu::test::hopper_bug_cases()) {
    emu::test::Bufs bufs(dev);
    std::string r;
    try {
      dev.launch(emu::test::hopper_buggy()->kernel(c.kernel), c.cfg, c.args(bufs));
    } catch (const qt::Error& e) {
      r = e.what();
    }
    INFO(c.kernel << ": " << r);
    CHECK_THAT(r, Catch::Matchers::Contains(std::string("emu: kernel ") + c.kernel + ": block (0,0,0)"));
    for (const std::string& m : c.must) CHECK_THAT(r, Catch::Matchers::Contains(m));
    bool line = false;
    for (const std::string& l : c.lines) line = line || r.find(l) != std::string::npos;
    CHECK(line);
  }
}

TEST_CASE("the correct use of the same scaffolding reports nothing, also after a misuse") {
  auto& dev = emu::test::sm90_device();
  emu::test::Bufs bufs(dev);
  std::vector<float> src(128);
  for (int i = 0; i < 128; ++i) src[i] = static_cast<float>(i);
  bufs.b.upload(src);
  CHECK_THROWS_AS(dev.launch(emu::test::hopper_buggy()->kernel("k_mbarrier_never_completes"), {{1}, {128}, 0},
                             emu::test::src_out(bufs)),
                  qt::Error);
  dev.launch(emu::test::hopper_buggy()->kernel("k_control"), {{1}, {128}, 0}, emu::test::src_out(bufs));
  // scale-d 0 drops the accumulator's ones: D = A * 0 = 0; the bulk copy brought src.
  CHECK(bufs.a.download<float>(128) == src);
}
