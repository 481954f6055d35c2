#pragma once
// The device-side API: the entry points a JIT-compiled kernel module calls through the Api table of
// kernels_src/common/emu_abi.h (memory hooks, barriers, warp collectives, cp.async, atomics, shared
// memory, trap). Each finds its thread from the FiberCtx, checks what the GPU would not forgive and does
// what the GPU would.
#include "kernels_src/common/emu_abi.h"

namespace qt::emu::exec {

// The table handed to every loaded module; one per process.
const Api* api_table();

}  // namespace qt::emu::exec
