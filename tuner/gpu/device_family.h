#pragma once
// The GPU kernel families of kernels_src/registry as tunable families on a dev::Device. With the `emu`
// device (runtime/emu) every point is compiled by the host JIT, run on the CPU emulator with its bug
// checks, and verified against the family's CPU reference: correctness only, timing not meaningful.
// Family names: "emu.<registry name>", shape = [M, N, K, G].
#include <string>
#include <vector>

#include "models/core/model_config.h"

namespace qt::tune {

// Registers "emu.<name>" for every registry family (idempotent).
void register_emu_families();
std::vector<std::string> emu_family_names();
// The [M, N, K, G] shapes a model needs from the registry family `name` (without the "emu." prefix).
std::vector<std::vector<int64_t>> emu_model_shapes(const std::string& name, const ModelConfig& config);

}  // namespace qt::tune
