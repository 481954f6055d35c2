#pragma once
// Small host-side helpers every family description needs: typed views of HostBuffers bytes, ceiling
// division for grids, kernel name expressions, and the split-k reduction linear families share.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels {

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
std::vector<T> from_bytes(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// "name<a, b, c>", the name expression of a kernel template instantiated with integer arguments.
inline std::string name_expr(const std::string& name, std::initializer_list<int64_t> args) {
  std::string s = name + "<";
  bool first = true;
  for (int64_t a : args) s += (first ? "" : ", ") + std::to_string(a), first = false;
  return s + ">";
}

// The reduction of kernels_src/common/splitk.cuh: sums `split` fp32 partials of `count` outputs from the
// workspace "ws" into "y", rounding to fp16 once. A family that splits K adds it after its main launch.
inline const std::string kSplitkReduce = "splitk_reduce_kernel<256>";
// A point's kernels: its own, plus the reduction when it splits K.
inline std::vector<std::string> with_splitk_reduce(std::vector<std::string> kernels, int64_t split) {
  if (split > 1) kernels.push_back(kSplitkReduce);
  return kernels;
}
inline Launch splitk_reduce_launch(int64_t count, int64_t split) {
  Launch r;
  r.kernel = kSplitkReduce;
  r.grid.x = static_cast<uint32_t>(cdiv(count, 256));
  r.block.x = 256;
  r.args = {KernelArg::buf("ws"), KernelArg::buf("y"), KernelArg::i32(count), KernelArg::i32(split)};
  return r;
}

}  // namespace qt::kernels
