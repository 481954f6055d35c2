#pragma once
// Small host-side helpers every family description needs: typed views of HostBuffers bytes, ceiling
// division for grids, kernel name expressions, and the split-k reduction linear families share.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family.h"
#include "models/core/linear_shapes.h"

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

// The registry's view of families generated in a list (one per format, say): pointers into a deque made once
// for the program's life, which never moves its elements.
inline std::vector<const KernelFamily*> family_pointers(const std::deque<KernelFamily>& all) {
  std::vector<const KernelFamily*> v;
  for (const KernelFamily& f : all) v.push_back(&f);
  return v;
}

// The families of a list made by `make(format, variant)` for each format and each of the two variants (true
// first), for family_pointers: the grouped, wgmma and routed MoE families each come in a fused and a plain
// variant (gate|up with SwiGLU, and down) per weight format.
template <class Formats, class Make>
std::deque<KernelFamily> two_per_format(const Formats& formats, Make make) {
  std::deque<KernelFamily> d;
  for (const auto& fmt : formats)
    for (bool variant : {true, false}) d.push_back(make(fmt, variant));
  return d;
}

// "name<a, b, c>", the name expression of a kernel template instantiated with integer arguments.
inline std::string name_expr(const std::string& name, const std::vector<int64_t>& args) {
  std::string s = name + "<";
  bool first = true;
  for (int64_t a : args) s += (first ? "" : ", ") + std::to_string(a), first = false;
  return s + ">";
}
inline std::string name_expr(const std::string& name, std::initializer_list<int64_t> args) {
  return name_expr(name, std::vector<int64_t>(args));
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

// KernelFamily::bytes_reread of a tiled matrix product. Its main launch (main_launch: the first that reads its
// weights, every input but the activations) loads the weights over its K range once per row block, and the
// activations once per column block where the family's loads in flight include them (`x_in_flight`): all but
// the first of each are re-reads. Row blocks are the grid's y unless `row_blocks` says (a persistent schedule
// over a one-dimensional grid).
inline void set_tiled_bytes_reread(KernelFamily& f, bool x_in_flight = true,
                                   std::function<int64_t(const Point&, const Shape&)> row_blocks = nullptr) {
  f.bytes_reread = [x_in_flight, row_blocks](const Point& p, const Shape& s, const LaunchPlan& plan) {
    const Launch& l = plan.launches.at(main_launch(plan));
    double weights = 0, x = 0;
    for (const BufferSpec& b : plan.buffers) {
      if (!launch_reads(l, b.name)) continue;
      if (is_activation_buffer(b.name)) x += double(b.bytes());
      else if (is_weight_buffer(b)) weights += double(b.bytes());
    }
    const double rows = row_blocks ? double(row_blocks(p, s)) : double(l.grid.y);
    return weights * (rows - 1) + (x_in_flight ? x * (double(l.grid.x) - 1) : 0.0);
  };
}

// KernelFamily::main_loop of a tiled matrix product whose main loop takes the K range of its block in steps of the
// point's `bk`, every warp of the block all of them, the K tiles shared out over grid.z (a split: the first
// splits take ceil(tiles / splits), what a block on the critical path runs). Row blocks are the grid's y unless
// `row_blocks` says (blocks past the rows a grouped GEMM routes exit before their loop).
inline void set_tiled_main_loop(KernelFamily& f, std::function<double(const Point&, const Shape&)> row_blocks = nullptr) {
  f.main_loop = [row_blocks](const Point& p, const Shape& s, const LaunchPlan& plan) {
    const Launch& l = plan.launches.at(main_launch(plan));
    const double k_tiles = double((s["K"] + p.at("bk") - 1) / p.at("bk"));
    const double splits = double(std::max<uint32_t>(1, l.grid.z));
    const double rows = row_blocks ? row_blocks(p, s) : double(l.grid.y);
    return LoopWork{double(l.grid.x) * rows * splits, std::ceil(k_tiles / splits)};
  };
}

// A family whose reference is a matrix product: its operands and the expectations from their sums, and the
// reference as those sums computed on the CPU, so the CPU and a device compute one definition.
template <class Operands, class Finish>
void set_linear_reference(KernelFamily& f, Operands operands, Finish finish) {
  f.linear_operands = operands;
  f.linear_expected = finish;
  f.reference = [operands, finish](const Shape& shape, const HostBuffers& in) {
    return finish(shape, in, cpu_linear_sums(operands(shape, in)));
  };
}

// The operands of an fp16 linear family's inputs "x" [M][K] and "values" [N][K] (the weights transposed).
inline LinearOperands fp16_linear_operands(const Shape& s, const HostBuffers& in) {
  LinearOperands ops;
  ops.m = s["M"], ops.n = s["N"], ops.k = s["K"];
  const std::vector<uint16_t> x = from_bytes<uint16_t>(in.at("x")), w = from_bytes<uint16_t>(in.at("values"));
  ops.a.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) ops.a[i] = half_bits_to_float(x[i]);
  ops.w.resize(w.size());
  for (int64_t n = 0; n < ops.n; ++n)
    for (int64_t k = 0; k < ops.k; ++k) ops.w[size_t(k * ops.n + n)] = half_bits_to_float(w[size_t(n * ops.k + k)]);
  return ops;
}

// A linear family's model shapes {M, N, K, G} at batch `m`: the model's linear shapes (models/core/linear_shapes.h)
// it serves, their group as G (`group_of`: e.g. K for fp16 weights, a default where only a config is known).
inline std::vector<Shape> linear_family_shapes(const ModelConfig& c, const ModelWeights* w, int64_t m,
                                               const std::function<bool(const LinearShape&)>& serves,
                                               const std::function<int64_t(const LinearShape&)>& group_of) {
  std::vector<Shape> out;
  for (const LinearShape& l : model_linear_shapes(c, w)) {
    if (!serves(l)) continue;
    Shape s{{"M", "N", "K", "G"}, {m, l.n, l.k, group_of(l)}, l.label};
    s.max_rows = l.max_rows;
    out.push_back(s);
  }
  return out;
}

// The largest of `v` (0 for none): a tolerance bound over every output.
inline double max_of(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(x));
  return m;
}

// ---- outputs added in place to a residual stream: out = fp16(out + fp16(sum)) ----
// The stream's values before the kernel: `count` fp16 values in [-4, 4).
inline std::vector<uint8_t> residual_input(int64_t count, uint64_t seed) {
  Rng rng(seed ^ 0x72657364ull);
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (uint16_t& x : v) x = float_to_half_bits(float(8.0 * rng.uniform() - 4.0));
  return bytes_of(v);
}
// `e`, the expected sums, becomes the expected stream: plus `prev` (the fp16 input), with the inner rounding,
// relative to the sum rather than the result, added to abs_tol as 2^-11 of the largest |sum|.
inline void expect_residual_add(Expected& e, const std::vector<uint8_t>& prev) {
  const std::vector<uint16_t> p = from_bytes<uint16_t>(prev);
  double largest = 0;
  for (size_t i = 0; i < e.values.size(); ++i) {
    largest = std::max(largest, std::abs(double(e.values[i])));
    e.values[i] += half_bits_to_float(p[i]);
  }
  e.abs_tol += std::ldexp(1.0, -11) * largest;
}

}  // namespace qt::kernels
