#pragma once
// argmax: token[m] = the index of the largest of logits[m][0..V) (ties to the lowest index, NaN never wins),
// for greedy decoding on the device so only one int per row comes back (source argmax.cuh).
#include "kernels_src/registry/family.h"

namespace qt::kernels::sampling {

const KernelFamily& argmax_family();

}  // namespace qt::kernels::sampling
