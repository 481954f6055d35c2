#pragma once
// swiglu: the element-wise MLP activation h[M][N] = fp16(silu(gate) * up) (source swiglu.cuh).
#include "kernels_src/registry/family.h"

namespace qt::kernels::activation {

const KernelFamily& swiglu_family();

}  // namespace qt::kernels::activation
