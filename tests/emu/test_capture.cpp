// Graph capture and events on the emu device: a replayed graph gives exactly what direct launches give, its
// launches keep every emulator check, calls that capture cannot record are refused by name, and event
// timings are ordered.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/graph_step_check.h"

using namespace qt;
using Catch::Matchers::Contains;
using dev::Buffer;
using dev::KernelArgs;

TEST_CASE("a captured step replayed 3 times on emu gives exactly the values of direct launches") {
  test::check_graph_replay_matches_direct_launches(emu::test::device());
}

TEST_CASE("a graph's launches keep the emulator's bounds check when replayed") {
  auto& dev = emu::test::device();
  test::GraphStep g(dev);
  g.reset();
  dev.begin_capture();
  // n one past the buffer: recording checks only the configuration and the arguments, so this is accepted.
  dev.launch(g.module->kernel("k_affine"), {{8}, {128}, 0},
             KernelArgs().add(g.x.ptr()).add(test::GraphStep::kN + 1).add(2).add(1));
  auto graph = dev.end_capture();
  CHECK_THROWS_WITH(graph->replay(), Contains("kernel k_affine") && Contains("out-of-bounds global"));
}

TEST_CASE("calls graph capture cannot record throw naming the call, and the capture goes on") {
  auto& dev = emu::test::device();
  test::GraphStep g(dev);
  g.reset();
  g.set_step(0);
  auto before = dev.record_event();
  dev.begin_capture();
  // One matcher: Catch2 v2's combined matchers hold references and cannot be returned.
  auto refused = [](const std::string& call) { return Contains(call + " is not allowed during graph capture"); };
  int host = 0;
  CHECK_THROWS_WITH(dev.allocate(16), refused("allocate()"));
  CHECK_THROWS_WITH(dev.free(g.y.ptr()), refused("free()"));
  CHECK_THROWS_WITH(dev.copy_to_device(g.step.ptr(), &host, 4), refused("copy_to_device()"));
  CHECK_THROWS_WITH(dev.copy_to_host(&host, g.step.ptr(), 4), refused("copy_to_host()"));
  CHECK_THROWS_WITH(dev.synchronize(), refused("synchronize()"));
  CHECK_THROWS_WITH(dev.record_event(), refused("record_event()"));
  CHECK_THROWS_WITH(dev.seconds_between(*before, *before), refused("seconds_between()"));
  CHECK_THROWS_WITH(dev.begin_capture(), refused("begin_capture()"));
  // A bad launch is refused when it is recorded, as it would be when run.
  CHECK_THROWS_WITH(dev.launch(g.module->kernel("k_affine"), {{1}, {2048}, 0},
                               KernelArgs().add(g.x.ptr()).add(1).add(2).add(1)),
                    Contains("more than 1024 threads"));
  CHECK_THROWS_WITH(dev.launch(g.module->kernel("k_affine"), {{1}, {32}, 0}, KernelArgs().add(g.x.ptr())),
                    Contains("with 1 arguments"));
  g.issue();
  auto graph = dev.end_capture();
  CHECK_THROWS_WITH(dev.end_capture(), Contains("end_capture() without begin_capture()"));
  graph->replay();
  CHECK(g.x.download<int>(test::GraphStep::kN) == test::GraphStep::expected(1));

  dev.begin_capture();
  CHECK_THROWS_WITH(graph->replay(), refused("Graph::replay()"));
  auto empty = dev.end_capture();
  empty->replay();  // an empty graph does nothing
  CHECK(g.x.download<int>(test::GraphStep::kN) == test::GraphStep::expected(1));
}

TEST_CASE("emu events measure ordered, non-negative intervals and reject a foreign event") {
  auto& dev = emu::test::device();
  test::GraphStep g(dev);
  g.reset();
  g.set_step(0);
  auto e0 = dev.record_event();
  g.issue();
  auto e1 = dev.record_event();
  g.issue();
  auto e2 = dev.record_event();
  const double t01 = dev.seconds_between(*e0, *e1), t02 = dev.seconds_between(*e0, *e2);
  CHECK(t01 > 0.0);  // a step of three emulated launches takes well over a clock tick
  CHECK(t02 >= t01);
  CHECK(t02 < 60.0);
  struct Foreign : dev::Event {};
  CHECK_THROWS_WITH(dev.seconds_between(*e0, Foreign{}), Contains("not recorded on this device"));
}
