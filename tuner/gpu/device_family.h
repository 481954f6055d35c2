#pragma once
// The GPU kernel families of kernels_src/registry as tunable families on a dev::Device. With the `emu`
// device (runtime/emu) every point is compiled by the host JIT, run on the CPU emulator with its bug
// checks, and verified against the family's CPU reference: correctness only, timing not meaningful.
// Family names: "emu.<registry name>", shape = [M, N, K, G].
#include <string>
#include <vector>

#include "models/core/model_config.h"

namespace qt::tune {

// Registers "emu.<name>" for every registry family (idempotent). With `target_sm` (e.g. 86) every point is
// first compiled for that architecture by the NVRTC compile service (tuner/compile), in the worker: an NVRTC
// error is compile_failed, and a point its static report prunes (spills, no block fits an SM) is
// resource_failed without being run; only the rest run on the emulator.
void register_emu_families(int target_sm = 0);
std::vector<std::string> emu_family_names();
// The [M, N, K, G] shapes a model needs from the registry family `name` (without the "emu." prefix).
std::vector<std::vector<int64_t>> emu_model_shapes(const std::string& name, const ModelConfig& config);

}  // namespace qt::tune
