#pragma once
// Small host-side helpers every family description needs: typed views of HostBuffers bytes, ceiling
// division for grids, and kernel name expressions.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

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

}  // namespace qt::kernels
