#pragma once
// A kernel family: one CUDA template source in kernels_src/ plus everything qtune needs to compile, launch,
// verify and tune any point of its parameter space. A family is data: the compile service, the emulator
// tests, `qtune static` and the tuner all work from this description and never special-case a family.
//
// Adding a family = a folder kernels_src/<name>/ with its .cuh source and a function returning its
// KernelFamily, plus one line in kernels_src/registry/registry.cpp.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/core/model_config.h"

namespace qt::kernels {

// A parameter point: parameter name -> value. Ordered, so its text form is canonical.
using Point = std::map<std::string, int64_t>;
std::string point_key(const Point& p);  // "bk=32,bm=16,bn=64" (sorted by name)

// The problem a launch solves: y[M][N] = x[M][K] * W[K][N] with AWQ groups of `group` along K.
struct ProblemShape {
  int64_t m = 1, n = 0, k = 0, group = 128;
  std::string label;  // where the shape comes from, e.g. "layer.w1"
};
std::string shape_key(const ProblemShape& s);  // "M=1 N=6144 K=4096 G=128"

struct Param {
  std::string name;
  std::vector<int64_t> values;
  int64_t default_value = 0;
  std::string help;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

enum class DType { F16, F32, I32 };
int dtype_size(DType t);

struct BufferSpec {
  enum class Role { Input, Output, Workspace };
  std::string name;
  DType dtype = DType::F16;
  int64_t elements = 0;
  Role role = Role::Input;
  int64_t bytes() const { return elements * dtype_size(dtype); }
};

// A kernel argument: a device pointer to a named buffer, or a 32-bit integer passed by value.
struct KernelArg {
  enum class Kind { Buffer, Int32 };
  Kind kind = Kind::Int32;
  std::string buffer;
  int32_t value = 0;
  static KernelArg buf(std::string name) { return {Kind::Buffer, std::move(name), 0}; }
  static KernelArg i32(int64_t v) { return {Kind::Int32, "", static_cast<int32_t>(v)}; }
};

struct Launch {
  std::string kernel;  // name expression, e.g. "awq_gemv_kernel<4, 1, 2, 1>"
  Dim3 grid, block;
  int64_t dynamic_smem = 0;
  std::vector<KernelArg> args;
};

// Everything to run one point on one shape: buffers (inputs filled by the generator, workspaces zeroed,
// outputs compared) and the launches, in order, on one stream.
struct LaunchPlan {
  std::vector<BufferSpec> buffers;
  std::vector<Launch> launches;
  const BufferSpec& buffer(const std::string& name) const;
};

using HostBuffers = std::map<std::string, std::vector<uint8_t>>;

// Expected contents of one output buffer and how close the kernel must come. A value passes when
// |got - want| <= abs_tol + rel_tol * |want|.
struct Expected {
  std::string buffer;
  std::vector<float> values;
  double abs_tol = 0.0, rel_tol = 0.0;
};

struct KernelFamily {
  std::string name;     // "awq_gemv"
  std::string source;   // path under kernels_src/, e.g. "awq/awq_gemv.cuh"
  std::string summary;
  int min_sm = 80;      // 75 where the source avoids cp.async / m16n8k16
  std::vector<Param> params;
  std::vector<Point> defaults;  // the points CI compiles and verifies; empty = each parameter's default
  // A shape every point accepts; static analysis reads block size and dynamic shared memory from
  // plan(point, probe_shape) when no real shape is given.
  ProblemShape probe_shape;

  // "" when the point is meaningful for every shape, else a reason (e.g. shared memory too large).
  std::function<std::string(const Point&)> point_constraint;
  // "" when the point can run `shape`, else a reason.
  std::function<std::string(const Point&, const ProblemShape&)> shape_constraint;
  // Name expressions the point instantiates (every launch in plan() uses one of them).
  std::function<std::vector<std::string>(const Point&)> kernels;
  std::function<LaunchPlan(const Point&, const ProblemShape&)> plan;
  // Inputs for `shape` from `seed`, deterministic; and the CPU reference for them.
  std::function<HostBuffers(const ProblemShape&, uint64_t seed)> make_inputs;
  std::function<std::vector<Expected>(const ProblemShape&, const HostBuffers& inputs)> reference;
  // The shapes a model needs from this family (prefill_m = the M to use for GEMM-type families).
  std::function<std::vector<ProblemShape>(const ModelConfig&)> model_shapes;

  std::vector<Point> default_points() const;
  Point default_point() const;
};

// Every point of the Cartesian product of the parameter values that satisfies point_constraint.
std::vector<Point> enumerate_points(const KernelFamily& f);
// Throws qt::Error if the point names an unknown parameter, misses one, or uses a value not in the space.
void validate_point(const KernelFamily& f, const Point& p);
// "bm=16,bn=64" -> Point (validated against the family).
Point parse_point(const KernelFamily& f, const std::string& text);

// Compares device results (raw bytes in the buffer's dtype) with the expectation; returns "" on success
// or a message naming the buffer, the first bad index, the values and the number of mismatches.
std::string compare_output(const BufferSpec& spec, const std::vector<uint8_t>& got, const Expected& want);

}  // namespace qt::kernels
