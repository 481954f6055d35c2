#pragma once
// mem_read and mem_read_bulk (source mem_read.cuh): a DRAM read stream at a stated depth per warp, by register
// loads or cp.async (sm_80) and by the TMA engine's bulk copies (sm_90). GPU runs time them as experiments
// (scripts/gpu/experiments) to measure what bytes in flight each kind of load turns into bandwidth.
#include "kernels_src/registry/family.h"

namespace qt::kernels::memread {

const KernelFamily& read_family();
const KernelFamily& bulk_read_family();

}  // namespace qt::kernels::memread
