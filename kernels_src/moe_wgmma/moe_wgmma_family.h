#pragma once
// moe_gate_up.frag.<type> and moe_down.frag.<type> (ops "moe_gate_up.frag", "moe_down.frag"), sm_90a: the
// grouped expert GEMMs on wgmma (moe_wgmma.cuh), for AWQ INT4, INT8 group-wise and Q8_0 experts stored in the
// frag layout, one expert after another in each array ("bq", "bs", and "bz" for AWQ; "gate_"/"up_" in front
// for the fused gate/up). Dims {T, E, TOPK, N, K, G}, as the file-layout grouped families (moe_family.h).
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels::moe_wgmma {

const std::vector<const KernelFamily*>& families();

}  // namespace qt::kernels::moe_wgmma
