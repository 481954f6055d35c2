#pragma once
// Problem shapes for verifying the AWQ kernels on the emulator: Qwen3-8B projections cut to what the CPU
// emulator runs in seconds (full K = 4096 where it matters, N cut to 64-128), and small odd shapes (M tails,
// several groups, N not a multiple of the block's column span, G = 32 / 64).
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::test {

inline std::vector<kernels::ProblemShape> awq_emu_shapes(const std::string& family) {
  using S = kernels::ProblemShape;
  if (family == "awq_dequant")
    return {S{1, 64, 4096, 128, "Qwen3-8B wq, N cut to 64"}, S{1, 80, 96, 32, "odd: 10 words per row, 3 groups"},
            S{1, 1024, 128, 128, "wk rows, K cut to one group"}};
  if (family == "awq_gemv")
    return {S{1, 64, 4096, 128, "Qwen3-8B wq decode, N cut to 64"},
            S{1, 64, 12288, 128, "Qwen3-8B down_proj decode, N cut to 64"},
            S{5, 208, 160, 32, "odd: M=5, 26 words, 5 groups of 32"},
            S{8, 576, 256, 64, "M=8, N spans 3 blocks at vec=1"}};
  return {S{17, 128, 4096, 128, "Qwen3-8B wq prefill: M=17, N cut to 128"},
          S{3, 128, 256, 64, "odd: M=3, 4 groups of 64"},
          S{70, 256, 384, 128, "M=70: tails in every M tile size"}};
}

}  // namespace qt::test
