#pragma once
// The fused decode MLP front, h[M<=8][N] = fp16(silu(x·Wg) * (x·Wu)), one family per weight type:
//   gate_up_swiglu.q8_0      gate_up_q8_0.cuh: a warp per ROWS output rows of the row-major int8 weights
//   gate_up_swiglu.awq_int4  gate_up_awq.cuh: lanes own packed columns, warps split K (awq_gemv's frame)
// Both split K over blocks as a parameter, with a reduction launch that applies silu.
#include "kernels_src/registry/family.h"

namespace qt::kernels::gate_up {

const KernelFamily& q8_0_family();
const KernelFamily& awq_int4_family();

}  // namespace qt::kernels::gate_up
