#pragma once
// moe_gate_up.frag.<type> and moe_down.frag.<type> (ops "moe_gate_up.frag", "moe_down.frag"), sm_90a: the
// grouped expert GEMMs on wgmma (moe_wgmma.cuh), for AWQ INT4, INT8 group-wise and Q8_0 experts stored in the
// frag layout, one expert after another in each array ("bq", "bs", and "bz" for AWQ; "gate_"/"up_" in front
// for the fused gate/up). Dims {T, E, TOPK, N, K, G}, as the file-layout grouped families (moe_family.h).
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels::moe_wgmma {

const std::vector<const KernelFamily*>& families();

// Whether the runtime repacks MoE experts into the frag layout and runs these families when not told which layout
// to use: on sm_90, where they run (sm_90a code loads on no other architecture). On an H200 they were 2.1-2.6x
// faster than the file layout's grouped GEMMs at 512 and 4096 tokens, and decode end to end 1.18x
// (results/gpu-h200-2026-11-27).
// An explicit expert layout (TensorRT-LLM's preprocessed one, `trtllm_int8`) is the experts' layout: never frag.
inline bool frag_experts_by_default(int arch, bool trtllm_int8 = false) { return !trtllm_int8 && arch == 90; }

}  // namespace qt::kernels::moe_wgmma
