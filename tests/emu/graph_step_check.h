#pragma once
// The graph replay check shared by the emu and cuda device tests. One step is four operations, the shape of
// a decode step: k_affine (x = 2x + 1), k_add_step (x += a value the host writes to device memory before
// each step, like a token id), a memset of y to 0 and k_accumulate (y += x), so y == x only if the memset
// ran before the accumulation in every step. Three steps run once as direct launches and once as replays of
// a graph captured from one step; both must give exactly the values the host computes.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "device/api/device.h"
#include "common/paths.h"

namespace qt::test {

inline dev::ModuleSource graph_step_module() {
  const std::string path = qt::source_root() + "/tests/emu/kernels/graph_step.cu";
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream text;
  text << f.rdbuf();
  dev::ModuleSource src;
  src.name = "graph_step.cu";
  src.source = text.str();
  src.kernels = {"k_affine", "k_add_step", "k_accumulate"};
  return src;
}

struct GraphStep {
  static constexpr int kN = 1000;  // not a multiple of the block: the tail block checks its bound
  static constexpr int kSteps = 3;
  dev::Device& dev;
  std::shared_ptr<dev::Module> module;
  dev::Buffer x, y, step;

  explicit GraphStep(dev::Device& d)
      : dev(d), module(d.load_module(graph_step_module())), x(d, kN * 4), y(d, kN * 4), step(d, 4) {}

  static int step_value(int s) { return 10 * (s + 1); }

  void reset() {
    std::vector<int> init(kN);
    for (int i = 0; i < kN; ++i) init[i] = i - 500;
    x.upload(init);
    y.upload(std::vector<int>(kN, -7));
  }
  // Issues one step's launches and memset (recorded instead when the device is capturing).
  void issue() {
    const dev::LaunchConfig cfg{{(kN + 127) / 128}, {128}, 0};
    dev.launch(module->kernel("k_affine"), cfg, dev::KernelArgs().add(x.ptr()).add(kN).add(2).add(1));
    dev.launch(module->kernel("k_add_step"), cfg, dev::KernelArgs().add(x.ptr()).add(step.ptr()).add(kN));
    dev.memset(y.ptr(), 0, kN * 4);
    dev.launch(module->kernel("k_accumulate"), cfg, dev::KernelArgs().add(y.ptr()).add(x.ptr()).add(kN));
  }
  void set_step(int s) { step.upload(std::vector<int>{step_value(s)}); }

  // x after `steps` steps, computed on the host.
  static std::vector<int> expected(int steps) {
    std::vector<int> v(kN);
    for (int i = 0; i < kN; ++i) {
      int x = i - 500;
      for (int s = 0; s < steps; ++s) x = 2 * x + 1 + step_value(s);
      v[i] = x;
    }
    return v;
  }
};

inline void check_graph_replay_matches_direct_launches(dev::Device& dev) {
  GraphStep g(dev);
  const std::vector<int> want = GraphStep::expected(GraphStep::kSteps);

  g.reset();
  for (int s = 0; s < GraphStep::kSteps; ++s) {
    g.set_step(s);
    g.issue();
  }
  CHECK(g.x.download<int>(GraphStep::kN) == want);
  CHECK(g.y.download<int>(GraphStep::kN) == want);

  g.reset();
  dev.begin_capture();
  g.issue();
  std::unique_ptr<dev::Graph> graph = dev.end_capture();
  // Capture recorded the step without running it.
  CHECK(g.x.download<int>(GraphStep::kN) == GraphStep::expected(0));
  for (int s = 0; s < GraphStep::kSteps; ++s) {
    g.set_step(s);
    graph->replay();
    CHECK(g.x.download<int>(GraphStep::kN) == GraphStep::expected(s + 1));
  }
  CHECK(g.y.download<int>(GraphStep::kN) == want);
}

}  // namespace qt::test
