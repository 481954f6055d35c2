#pragma once
// The GPU flow's options for the emulator in tests: one verified run per point, no warm-up, racing or timing
// floor (the emulator's times mean nothing), no progress line.
#include "tuner/flow/gpu_tuning.h"

namespace qt::test {

inline tune::GpuTuningOptions emu_flow_options() {
  tune::GpuTuningOptions o;
  o.device = "emu";
  o.quiet = true;
  o.tune.timeout_s = 120;
  o.tune.measure.warmup = 0;
  o.tune.measure.min_reps = o.tune.measure.max_reps = 1;
  o.tune.measure.min_seconds = 0;
  o.tune.measure.racing = false;
  return o;
}

}  // namespace qt::test
