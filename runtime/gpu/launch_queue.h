#pragma once
// The launches of one forward step, queued and then run, or replayed as a captured graph. A decode step's
// launch sequence is the same at every position (tokens and positions are read from device memory), so when
// a step's sequence (kernels, configurations and argument bytes) equals the previous step's, it is captured
// once into a dev::Graph (a CUDA graph on a GPU) and later identical steps replay it. Any other device work
// in the middle of a step (an upload, a memset) first runs what is queued and makes the step uncapturable.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device/api/device.h"

namespace qt::rt {

class LaunchQueue {
 public:
  LaunchQueue(dev::Device& device, bool graphs) : device_(device), graphs_(graphs) {}

  void begin_step(bool capturable);
  // Outside a step the launch runs at once.
  void launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, dev::KernelArgs args);
  // Work a library queues on the device's stream itself (a cuBLASLt GEMM), in order with the launches.
  // `signature` must name everything the call reads and writes (sizes and device addresses), so that a step
  // is replayed from its graph only when it would do the same; the call is recorded into the graph when the
  // step is captured.
  void call(std::function<void()> fn, std::string signature);
  // Runs what is queued now (before other device work inside a step).
  void flush();
  void end_step();
  // Hears, after each launch a step runs (at its end or in a flush), how many of the step's launches have run
  // and how many it has queued so far: the progress of a step that runs for minutes on the emulator.
  void on_launch(std::function<void(size_t run, size_t queued)> observer) { observer_ = std::move(observer); }

  struct Stats {
    int64_t launches = 0;        // kernels run directly
    int64_t captures = 0;        // graphs captured
    int64_t replays = 0;         // steps replayed from a graph
    int64_t replayed_launches = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Queued {
    dev::Kernel kernel;
    dev::LaunchConfig cfg;
    dev::KernelArgs args;
    std::function<void()> call;  // set for call(): runs instead of a launch
    std::string call_signature;
  };
  void run_one(const Queued& q);
  void run_queued();
  std::string signature() const;

  dev::Device& device_;
  bool graphs_;
  bool in_step_ = false, capturable_ = false;
  std::vector<Queued> queue_;
  std::string last_signature_, graph_signature_;
  std::unique_ptr<dev::Graph> graph_;
  Stats stats_;
  std::function<void(size_t, size_t)> observer_;
  size_t step_queued_ = 0, step_run_ = 0;
};

}  // namespace qt::rt
