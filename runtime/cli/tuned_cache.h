#pragma once
// Reading a `qtune --device cpu` cache (the tuner's SQLite store) into the CPU backend's options: for each
// matmul shape the model has, the winner measured on this CPU (same device fingerprint) gives its rows
// per work item; the instruction set and thread count come from the winner of the largest shape, the set as the
// dot products it chose, run with the fastest ISA that has them (fastest_with_dot_products_of, isa_kernels.h).
// The store's decode ranking for this CPU and model (`qbench --choose-decode`, decode_choice.h) sets the decode
// prefetch, unless the options already name it.
#include <string>

#include "models/core/weights.h"
#include "runtime/cpu/cpu_backend.h"

namespace qt::rt {

// Updates `options` (threads only when `keep_threads` is false). Returns a one-line summary for the user.
// Throws qt::Error if the file is not a qtune store.
std::string apply_tuned_cache(const std::string& path, const ModelWeights& weights, CpuOptions& options,
                              bool keep_threads);

}  // namespace qt::rt
