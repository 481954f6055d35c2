// The kernels_src/common/README.md example (tests/emu/kernels/block_sum.cu) runs on the emu device as documented.
#include <catch2/catch.hpp>

#include <numeric>

#include "tests/emu/emu_test_util.h"

using namespace qt;

TEST_CASE("block_sum example kernel sums on the emulator") {
  auto& dev = emu::test::device();
  auto mod = emu::test::module("block_sum.cu", {"block_sum<128>"});
  const int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17);
  dev::Buffer bx(dev, n * 4), out(dev, 4);
  bx.upload(x);
  dev.memset(out.ptr(), 0, 4);
  dev.launch(mod->kernel("block_sum<128>"), {{4}, {128}, 0}, dev::KernelArgs().add(bx.ptr()).add(out.ptr()).add(n));
  const float s = out.download<float>(1)[0];
  CHECK(s == std::accumulate(x.begin(), x.end(), 0.0f));
}
