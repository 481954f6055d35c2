#pragma once
// `qtune static --step ... --against-launches FILE`: the step prediction (step_predict.h) beside what a device
// timed launch by launch (qrun --launch-times): per kernel, its launches and time per step, predicted and
// measured, and the time between launches against the in-stream launch cost the model adds.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tuner/static/step_predict.h"

namespace qt::tune {

struct KernelTimes {
  std::string kernel;  // a name expression, or "cuBLASLt"
  double predicted_launches = 0, measured_launches = 0;  // per step
  double predicted_s = 0, measured_s = 0;                // per step, the kernels' own time
};

struct LaunchComparison {
  std::string device;         // the timed device's name
  size_t steps = 0;           // measured steps averaged
  double measured_step_s = 0;  // first launch's start to last launch's end, events included
  double measured_kernels_s = 0, predicted_kernels_s = 0;
  double measured_launches = 0, predicted_launches = 0;
  double predicted_launch_cost_s = 0;  // the model's in-stream cost per launch, times its launches
  std::vector<KernelTimes> kernels;    // the largest measured time first
};

// The kernels the step's default choices launch, by name expression ("cuBLASLt" for fp16 GEMMs on it), with
// their launches per step and the time the model gives them: a plan's body to its main launch
// (kernels::main_launch; a split's reduction or the experts' placement beside it takes little), every launch
// counted.
std::map<std::string, KernelTimes> predicted_kernels(const StepPrediction& p);

// The decode steps of the file (one row each) when `decode`, else its steps of `prompt` rows. Throws qt::Error
// (exit 2) naming the file when it is no launch-times file or holds no such step.
LaunchComparison compare_launches(const StepPrediction& p, const std::string& path, bool decode, int64_t prompt,
                                  double stream_launch_us);

}  // namespace qt::tune
