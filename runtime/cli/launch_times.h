#pragma once
// qrun --launch-times FILE: every step's launches as the device timed them (LaunchQueue::time_launches), and per
// kernel over the decode steps the count, mean time and share of the step, with the time between launches.
// What the static model's step prediction (qtune static --step) is held to launch by launch.
#include <string>
#include <vector>

#include "runtime/cli/run_device.h"

namespace qt::rt {

struct KernelTimeSummary {
  std::string name;
  double per_step = 0;  // launches of it in a step
  double mean_s = 0;    // per launch
  double share = 0;     // of the steps' time
};
struct LaunchTimeSummary {
  bool decode = false;     // the steps summarised are the decode steps (one row each); else every step
  size_t steps = 0;
  double step_s = 0;       // mean step
  double launches_s = 0;   // mean sum of its launches' times
  double launches = 0;     // mean launches a step
  std::vector<KernelTimeSummary> kernels;  // slowest share first
};
LaunchTimeSummary summarize_launch_times(const std::vector<LaunchQueue::TimedStep>& steps);

// Writes the JSON (schema "qtune-launch-times/1") and prints the summary on stderr. Throws qt::Error (exit 1)
// when the file cannot be written.
void write_launch_times(const std::string& path, const RunDevice& d);

}  // namespace qt::rt
