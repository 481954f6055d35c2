#pragma once
// Experiments: points measured as they are, not searched. A GPU session lasts minutes, and the questions the
// last one left (is the frag GEMV latency-bound? does the stream GEMV lose a wave to its registers?) are each
// settled by a handful of named points. A file lists them; `qtune --gpu smNN --points FILE` measures every
// point through the tuning flow's worker (verified against the CPU reference, timed with the same protocol) into
// the store, where calibration and the runtime's winners read them like any tuned point.
//
//   {"experiments": [
//     {"why": "H1: is the frag GEMV latency-bound?", "family": "awq_frag_gemv",
//      "shape": {"M": 1, "N": 4096, "K": 4096, "G": 128},
//      "points": [{}, {"split": 16}, {"split": 16, "pf": 4}]}]}
//
// A point names only what it changes from the family's first default point that runs that shape ({} is that
// default itself, what the runtime runs untuned); where no default runs it, a point gives every parameter. Every mistake (an unknown family, dimension,
// parameter or value, a point the family refuses at that shape, and why) is an error naming the experiment.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tuner/flow/gpu_tuning.h"

namespace qt::tune {

// One job per experiment, its points in the file's order (GpuJob::listed), its budget their count.
// `device`: "cuda" or "emu". Throws qt::Error naming the experiment (its index and `why`) and the problem.
std::vector<GpuJob> plan_experiment_jobs(const nlohmann::json& doc, const std::string& device, int target_sm);

// Reads and plans the file at `path`; errors name the file.
std::vector<GpuJob> read_experiment_jobs(const std::string& path, const std::string& device, int target_sm);

// One line per listed point after a run: the experiment, family, shape, the point's changes from the default,
// and its status and median time in the store (or "not measured": a time limit stopped the run first). `timed`:
// false on the emulator, whose times mean nothing ("verified").
std::vector<std::string> experiment_lines(const std::vector<GpuJob>& jobs, const Store& store,
                                          const winners::DeviceFingerprint& device, bool timed);

}  // namespace qt::tune
