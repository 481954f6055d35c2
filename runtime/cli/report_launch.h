#pragma once
// qbench --report's launch rows: what one kernel launch costs back to back in the stream, replayed from a CUDA
// graph, and with programmatic dependent launch (sm_90+), measured directly. The static model prices a decode
// step's launches with one in-stream cost (GpuPeaks::stream_launch_us) that it could only fit from a whole
// step, where launch, ramp and tail are one sum; these rows separate the launch from the kernels around it.
//   kernel:    mem_copy at its default point, one round of its unrolled loads and stores per thread, so a launch's
//              time is the launch itself plus the smallest ramp and drain a grid of that size has;
//   rows:      one block (the floor), and a grid of about one block per SM (what a decode GEMV launches);
//   variants:  "stream", "graph", "stream + PDL", "graph + PDL"; seconds are per launch (the median time of
//              the whole chain over its launches), and a variant the device cannot run says why.
#include <nlohmann/json.hpp>

#include "device/api/device.h"
#include "runtime/cli/report_measure.h"

namespace qt::rt {

// The report's "launch_cost" object, {"method": text, "rows": [...]} (runtime/report/report_json.h).
nlohmann::json bench_launch_cost(dev::Device& device, const KernelBenchOptions& options);

}  // namespace qt::rt
