#pragma once
// How the SIMD kernels cut a count (a panel's tokens in the Q8_0 GEMM, a kv head's queries in attention) into
// register tiles, each compiled for its size. Each kernel's translation unit is built for its own ISA, so
// everything here has internal linkage: every unit gets its own copy, compiled with its flags, and the linker can
// never hand one ISA's code to another (an inline function or template with external linkage would be merged
// across them).
#include <cstdint>
#include <type_traits>
#include <utility>

namespace qt::rt {
namespace {

template <int N>
using Const = std::integral_constant<int, N>;

// at(Const<N>{}, i) on items [i, i + N): kMax items at a time, then the rest on one tile of their count.
template <int kMax, typename At>
void in_tiles(int64_t count, At&& at) {
  int64_t i = 0;
  for (; i + kMax <= count; i += kMax) at(Const<kMax>{}, i);
  const int64_t rest = count - i;
  [&]<int... R>(std::integer_sequence<int, R...>) {
    ((rest == R + 1 ? at(Const<R + 1>{}, i) : void()), ...);
  }(std::make_integer_sequence<int, kMax - 1>{});
}

}  // namespace
}  // namespace qt::rt
