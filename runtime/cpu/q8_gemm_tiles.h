#pragma once
// How the SIMD Q8_0 GEMM kernels pick a tile compiled for the weight group's depth and read a token's activations
// for a step (register_tiles.h cuts a panel's tokens into tiles). Internal linkage, for the reason
// register_tiles.h gives.
#include <cstdint>
#include <cstring>

#include "runtime/cpu/register_tiles.h"

namespace qt::rt {
namespace {

// A token's 4 activations at p as one int32, to broadcast against a step's 4 columns.
inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// at(Const<G>{}) with G the group's depth where models come with it (32: GGUF's Q8_0, 64: qconvert's), so a
// tile's products unroll over the group and its sums stay in registers; G = 0 takes the depth at run time. (With
// the depth a run-time bound, GCC 12 shuffled the AVX-512 tile's sums through register moves and a stack slot,
// and the 0.6B shape decoded at 80% of the read bandwidth on 2 threads of an AMX Xeon.)
template <typename At>
void by_group_depth(int64_t group, At&& at) {
  if (group == 32) return at(Const<32>{});
  if (group == 64) return at(Const<64>{});
  at(Const<0>{});
}

// The same for U4 panels, whose AWQ checkpoints come with groups of 128 (and 64, 32).
template <typename At>
void by_u4_group_depth(int64_t group, At&& at) {
  if (group == 128) return at(Const<128>{});
  if (group == 64) return at(Const<64>{});
  if (group == 32) return at(Const<32>{});
  at(Const<0>{});
}

}  // namespace
}  // namespace qt::rt
