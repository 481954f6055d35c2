#pragma once
// The static model's prediction of one whole step (step_launches.h): each launch's time by the roofline model
// (roofline.h) at the family the runtime would pick by default, and at the model's best point over every
// family serving that op (a prediction of a tuned run), summed with the in-stream launch cost
// (GpuPeaks::stream_launch_us), against the step's bandwidth roofline.
//
// cuBLASLt (fp16 GEMMs above the GEMV rows, fp16 weights no family tiles) is no family: it is modelled as a
// roofline at kCublasLtEfficiency of the tensor pipe and the achievable bandwidth, and the output says so.
// Without a compile service, registers are not compiled: occupancy comes from threads and shared memory alone,
// which flatters a register-bound kernel (gate|up's 249 registers allow 8 warps an SM, and the stream GEMVs' loads
// in flight are counted a warp). With one, the point each launch settles on, by default and model-best, is
// compiled for `sm` and timed with its registers; the model-best search itself still runs without them.
#include <string>
#include <vector>

#include "device/jit/compile_service.h"
#include "tuner/static/roofline.h"
#include "tuner/static/step_launches.h"

namespace qt::tune {

// cuBLASLt's fp16 GEMMs on the H200 run (shared/gpu-runs/h200-2026-11-26/report-8b-awq-default.md) reached
// 618-720 TFLOP/s on the Qwen3-8B shapes at M >= 256 (N >= 4096), 0.62-0.73 of the 989 TFLOP/s wgmma peak.
inline constexpr double kCublasLtEfficiency = 0.70;

struct LaunchEstimate {
  std::string family;  // "cuBLASLt (roofline at 70% of the tensor peak)" for cuBLASLt
  std::string point;   // point_key, empty for cuBLASLt
  kernels::Point at;   // the point itself (empty for cuBLASLt)
  int registers = 0;   // of its main kernel, where compiled (predict_step's service); 0: not compiled
  RooflineEstimate e;
  int launches = 0;    // kernel launches of one occurrence (the plan's)
};

struct LaunchPrediction {
  StepLaunch launch;
  LaunchEstimate by_default;  // the runtime's default choice (kernel_choice.cpp without a tuned store)
  LaunchEstimate best;        // the model's fastest point over every family serving the op
};

struct StepPrediction {
  std::vector<LaunchPrediction> launches;
  double default_s = 0, best_s = 0;          // one step
  int64_t default_launches = 0, best_launches = 0;
  StepBytes min_bytes;
  double roofline_s = 0;   // (weights + KV) / achievable bandwidth
  double tokens = 1;       // tokens the step produces or consumes
  bool registers_compiled = false;  // predict_step was given a compile service
  int uncompiled = 0;      // chosen points (default and best, per launch) it could not compile: timed without registers
  double default_tok_s() const { return tokens / default_s; }
  double best_tok_s() const { return tokens / best_s; }
  double roofline_tok_s() const { return tokens / roofline_s; }
};

// `peak` as gpu_peaks gives it; `sm` picks the families that run there and their occupancy limits. `service`
// (optional): the chosen points compiled for `sm`, their registers in their occupancy.
StepPrediction predict_step(const StepSpec& spec, int sm, const GpuPeaks& peak,
                            compile::CompileService* service = nullptr);

}  // namespace qt::tune
