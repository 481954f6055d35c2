#pragma once
// rmsnorm: y = w * x / sqrt(mean(x^2) + eps) per row of x[M][N], with the residual add x += r fused when the
// shape's R is 1 (source rmsnorm.cuh). Serves the layer norms and the final norm.
#include "kernels_src/registry/family.h"

namespace qt::kernels::norm {

const KernelFamily& rmsnorm_family();

}  // namespace qt::kernels::norm
