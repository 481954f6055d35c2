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

  // `rows`: the tokens the step runs, kept with its launch times (time_launches).
  void begin_step(bool capturable, int64_t rows = 0);
  // Outside a step the launch runs at once.
  void launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, dev::KernelArgs args);
  // Work a library queues on the device's stream itself (a cuBLASLt GEMM), in order with the launches.
  // `signature` must name everything the call reads and writes (sizes and device addresses), so that a step
  // is replayed from its graph only when it would do the same; the call is recorded into the graph when the
  // step is captured.
  // `name` says what the call runs in launch times ("cuBLASLt 512x4096x4096").
  void call(std::function<void()> fn, std::string signature, std::string name = "library call");
  // Runs what is queued now (before other device work inside a step).
  void flush();
  // Forgets the captured graph and the step seen last, so the next steps launch and capture anew: what a change
  // the signatures do not see needs (a launch attribute such as programmatic dependent launch). Between steps.
  void drop_graph();
  void end_step();
  // Hears, after each launch a step runs (at its end or in a flush), how many of the step's launches have run
  // and how many it has queued so far: the progress of a step that runs for minutes on the emulator.
  void on_launch(std::function<void(size_t run, size_t queued)> observer) { observer_ = std::move(observer); }

  // A diagnostic (qrun --launch-times): every launch and library call of a step runs between two events on
  // the device's stream, and no step is captured into a graph; the times are read when the step ends (which
  // then waits for the device). What lies between a launch's end and the next one's start is the launch gap
  // plus the events' own cost.
  void time_launches(bool on) { timing_ = on; }
  struct TimedLaunch {
    std::string name;  // the kernel's name expression, or the library call's name
    dev::LaunchConfig cfg;  // zero for a library call
    bool call = false;
    double seconds = 0;
  };
  struct TimedStep {
    int64_t rows = 0;
    double seconds = 0;  // from the first launch's start to the last one's end
    std::vector<TimedLaunch> launches;
  };
  // The first step and the latest kTimedSteps - 1 (a long chat would otherwise grow without end), and how
  // many were dropped between them.
  static constexpr size_t kTimedSteps = 256;
  const std::vector<TimedStep>& timed_steps() const { return timed_; }
  size_t timed_steps_dropped() const { return timed_dropped_; }

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
    std::string call_name;
  };
  struct PendingTime {
    TimedLaunch launch;
    std::unique_ptr<dev::Event> start, end;
  };
  void run_one(const Queued& q);
  void run_queued();
  void read_step_times();
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
  bool timing_ = false;
  int64_t step_rows_ = 0;
  std::vector<PendingTime> pending_times_;  // this step's, read at end_step
  std::vector<TimedStep> timed_;
  size_t timed_dropped_ = 0;
};

}  // namespace qt::rt
