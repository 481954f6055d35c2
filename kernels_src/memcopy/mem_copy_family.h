#pragma once
// mem_copy: dst = src over N 16-byte vectors (source mem_copy.cuh). qbench's reports time it to measure the
// device's memory bandwidth in the same run as the kernels they compare.
#include "kernels_src/registry/family.h"

namespace qt::kernels::memcopy {

const KernelFamily& copy_family();

// The grid a point launches for N vectors: enough blocks for every SM of the largest GPUs several times over.
int64_t copy_blocks(const Point& p, int64_t vectors);

}  // namespace qt::kernels::memcopy
