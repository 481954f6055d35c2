#pragma once
// A kernel family: everything qtune needs to compile, run, verify and tune any point of one kernel's
// parameter space, as data. Two kinds share this one model:
//   device families: a CUDA template source in kernels_src/<folder>/, compiled at run time (NVRTC for a GPU,
//                    the host JIT for the emulator) and run through a launch plan on a dev::Device;
//   host families:   CPU kernels compiled into the binary, run through `host_prepare` on the host.
// The compile service, verification, `qtune static`, the tuner and the runtime's winner lookup all work from
// this description and never special-case a family.
//
// Adding a family = a folder kernels_src/<name>/ (its sources, a CMakeLists.txt calling qtune_kernel_family,
// and a function returning its KernelFamily) plus one line in kernels_src/registry/registry.cpp.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "models/core/model_config.h"
#include "models/core/weights.h"

namespace qt::kernels {

// ---- element types: size, decoding and comparison are written once, here ----
enum class DType { F32, F16, BF16, I8, U8, I32, I64 };
int dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "f16", "bf16", "i8", "u8", "i32", "i64"
// Element `i` of a raw buffer of `t`, widened to double (integers exactly up to 2^53).
double decode_element(DType t, const uint8_t* data, size_t i);

// ---- shapes: named dimensions declared by the family ----
struct Shape {
  std::vector<std::string> names;  // the family's dims, e.g. {"M", "N", "K", "G"}
  std::vector<int64_t> values;     // same order
  std::string label;               // where the shape comes from, e.g. "wq+wk"
  // A model shape's largest batch M the runtime runs (0: any): the lm_head and the argmax over its logits see
  // at most kLogitRowsPerPass rows, so a tuner's larger buckets would time what never runs.
  int64_t max_rows = 0;
  // The value of dimension `name`; throws qt::Error naming the dimension when the shape has none.
  int64_t operator[](std::string_view name) const;
  size_t size() const { return values.size(); }
};
std::string shape_key(const Shape& s);  // "M=1 N=6144 K=4096 G=128"

// ---- parameters and points ----
using Point = std::map<std::string, int64_t>;
std::string point_key(const Point& p);  // "bk=32,bm=16,bn=64" (sorted by name)

struct Param {
  std::string name;
  std::vector<int64_t> values;
  int64_t default_value = 0;
  std::string help;
  // Names of the values where they are symbols rather than numbers (e.g. an instruction set); empty for
  // numeric parameters. A point's JSON form uses these names.
  std::vector<std::string> labels = {};
  // A choice every GPU run should measure whether or not a tune reaches it (one the static model has no term
  // for, or one it has just been given): every report times the family's default points that differ from its
  // chosen default in this parameter alone beside it (one_parameter_neighbours).
  bool report_ab = false;
  // A parameter added after points were stored: the value those points ran, the kernel as it was before (for the
  // frag GEMVs' zpf and ru, tests/tuner/h200_fixture.h compiles both to the same code). Unset: a stored point
  // without it names nothing.
  std::optional<int64_t> absent_value = std::nullopt;
};

// ---- buffers and kernel arguments ----
struct BufferSpec {
  // InOut: filled from the inputs like an Input, then partly overwritten by the kernel (a KV cache whose new
  // rows a kernel writes); the reference gives its whole expected contents.
  enum class Role { Input, Output, Workspace, InOut };
  std::string name;
  DType dtype = DType::F16;
  int64_t elements = 0;
  Role role = Role::Input;
  int64_t bytes() const { return elements * dtype_size(dtype); }
  bool filled_from_inputs() const { return role == Role::Input || role == Role::InOut; }
};

// A scalar the caller chooses at run time rather than the shape (a model's rms eps or rope theta). Verification
// and tuning pass `test_value`; the runtime passes the model's value. Positions that change every decode step
// are not scalars: they live in a device buffer, so a captured decode graph replays unchanged.
struct ScalarSpec {
  std::string name;
  DType dtype = DType::F32;  // F32 or I32
  double test_value = 0;
};

// A kernel argument: a device pointer to a named buffer, a scalar passed by value, a named run-time scalar
// (one of the family's `scalars`, bound by whoever runs the plan), or a null pointer (an optional output a
// point does not produce).
struct KernelArg {
  enum class Kind { Buffer, I32, I64, F32, Scalar, Null };
  Kind kind = Kind::I32;
  std::string buffer;  // the buffer's name, or the scalar's for Kind::Scalar
  int64_t integer = 0;
  float real = 0;
  static KernelArg buf(std::string name) { return {Kind::Buffer, std::move(name), 0, 0}; }
  static KernelArg i32(int64_t v) { return {Kind::I32, "", v, 0}; }
  static KernelArg i64(int64_t v) { return {Kind::I64, "", v, 0}; }
  static KernelArg f32(float v) { return {Kind::F32, "", 0, v}; }
  static KernelArg scalar(std::string name) { return {Kind::Scalar, std::move(name), 0, 0}; }
  static KernelArg null() { return {Kind::Null, "", 0, 0}; }
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

struct Launch {
  std::string kernel;  // name expression, e.g. "awq_gemv_kernel<4, 1, 2, 1>"
  Dim3 grid, block;
  int64_t dynamic_smem = 0;
  std::vector<KernelArg> args;
  Dim3 cluster;  // thread block cluster (sm_90; 1x1x1: none)
};

// Everything to run one point on one shape: buffers (inputs filled by the generator, workspaces and outputs
// start as garbage) and, for device families, the launches in order on one stream.
struct LaunchPlan {
  std::vector<BufferSpec> buffers;
  std::vector<Launch> launches;
  const BufferSpec& buffer(const std::string& name) const;
};

using HostBuffers = std::map<std::string, std::vector<uint8_t>>;

// Expected contents of one output buffer and how close a kernel must come: a value passes when
// |got - want| <= abs_tol + rel_tol * |want|.
struct Expected {
  std::string buffer;
  std::vector<float> values;
  double abs_tol = 0.0, rel_tol = 0.0;
};

// ---- references that are matrix products (the linear layers) ----
// The operands, exact in fp32: y = a w, and the sums a tolerance needs. A family's reference that is such a
// product is computed from these on the CPU (cpu_linear_sums) or, for a large shape, on a device
// (device/plan/linear_reference.h); the family turns the sums into its expectations either way.
struct LinearOperands {
  int64_t m = 0, n = 0, k = 0;
  std::vector<float> a;  // [M][K]
  std::vector<float> w;  // [K][N]
  std::vector<float> g;  // [M][K], or empty: a second left operand whose product with |w| a tolerance needs
};
// [M][N] each, summed in double and rounded once to fp32: y = a w, abs = |a| |w|, g_abs = g |w| (empty
// without g).
struct LinearSums {
  std::vector<float> y, abs, g_abs;
};
// The sums on the CPU: double accumulation, rows spread over the machine's cores. Throws qt::Error when the
// operands' sizes disagree with m, n, k.
LinearSums cpu_linear_sums(const LinearOperands& ops);

// Why a point cannot run, raised while preparing it; the tuner records the reason with its status.
class PointRejected : public std::runtime_error {
 public:
  enum class Reason { Invalid, CompileFailed, ResourceFailed };
  PointRejected(Reason r, const std::string& what) : std::runtime_error(what), reason(r) {}
  Reason reason;
};

// A host family's point prepared on its buffers (which stay in place while it lives).
class HostKernel {
 public:
  virtual ~HostKernel() = default;
  // Runs once, writing the plan's outputs; returns the seconds the kernel itself took.
  virtual double run() = 0;
};

// A block's serial chain of memory waits (KernelFamily::latency_chain): round trips to DRAM, and to the L2 (a
// split's arrival counter and partials).
struct LatencyChain {
  double dram_rounds = 0;
  double l2_rounds = 0;
};

// What a launch's main loop runs (KernelFamily::main_loop): blocks that run it, and trips of each of their warps.
struct LoopWork {
  double blocks = 0;
  double trips_per_warp = 0;
};

struct KernelFamily {
  std::string name;     // "awq_gemv", "matvec.q8_0"
  std::string summary;
  std::string op;       // the runtime op it serves: "linear", "dequant", ...
  std::vector<WeightType> weight_types;  // weight types it serves; empty = not tied to a weight type
  std::string dtypes;   // operand types for result stores, e.g. "awq_int4xf16->f16"
  // Families with the same problem compute the same thing from the same inputs: for a shape, their
  // make_inputs and reference agree, so a tuner computes the reference once for all of them. Empty: the
  // family's own name (problem_name()).
  std::string problem;
  const std::string& problem_name() const { return problem.empty() ? name : problem; }
  std::vector<std::string> dims;         // named shape dimensions, e.g. {"M", "N", "K", "G"}

  std::vector<ScalarSpec> scalars;  // run-time scalars its launches take (KernelArg::scalar)

  std::vector<Param> params;
  std::vector<Point> defaults;  // the points CI compiles and verifies; empty = each parameter's default
  // The default points in the order this family prefers them for a shape, where that depends on the shape
  // (a decode tile first for one token, a large tile first for a long prompt); unset = `defaults` order.
  std::function<std::vector<Point>(const Shape&)> defaults_for;
  // "" when the point is meaningful for every shape, else a reason (e.g. shared memory too large).
  std::function<std::string(const Point&)> point_constraint;
  // "" when the point can run `shape`, else a reason.
  std::function<std::string(const Point&, const Shape&)> shape_constraint;

  // Device families: source path under kernels_src/, lowest architecture, name expressions per point.
  std::string source;
  int min_sm = 80;
  std::function<std::vector<std::string>(const Point&)> kernels;
  // Device families whose loop keeps a known amount of its streamed operand in flight: the bytes one warp
  // has issued and not yet consumed (ring depth x load size), which the static model's Little's-law term reads
  // in place of its generic per-warp guess. Unset where unrolling, not a ring, decides it.
  std::function<int64_t(const Point&)> bytes_in_flight_per_warp;
  // The bytes a point's launches read and write on `shape`, where its buffers' sizes overstate them (a KV cache
  // read up to the context, not to its capacity); unset: every buffer once, workspaces twice.
  std::function<double(const Point&, const Shape&)> bytes_moved;
  // The bytes a point's main launch (main_launch of `plan`, the point's own) loads again beyond those it moves,
  // where its blocks re-read an operand (a GEMM's weights by every further row block, its activations by
  // every further column block): L2 hits, which each SM's loads in flight must carry beside the DRAM bytes
  // (the static model's Little's-law term). Unset: none.
  std::function<double(const Point&, const Shape&, const LaunchPlan& plan)> bytes_reread;
  // Families whose re-reads hold a load in flight as long as a DRAM load does, not an L2 hit's shorter
  // latency. Set from measurement, on the wgmma main loop: the second H200 run's grouped wgmma GEMMs at one
  // point (bm=64, wg=2; 512, 1024 and 4096 tokens) grew with their re-reads at the DRAM latency's rate, where
  // the mma.sync GEMMs' measured rows fit the L2's. Why is not known (see results/wgmma-gemm-predicted.md).
  bool rereads_at_dram_latency = false;
  // The work of a point's main launch's main loop, for the static model's issue time: the blocks that run it
  // and how many times each of their warps does (a tiled GEMM: its K steps), times the instructions of one trip
  // (the PTX's main loop, compile::KernelResources::loop_instructions), over the issue slots of the SMs they
  // reach. Unset: no issue time, the model's memory and compute sides alone.
  std::function<LoopWork(const Point&, const Shape&, const LaunchPlan& plan)> main_loop;
  // The dependent memory round trips one block of the main launch waits through in turn, where its loop is a
  // chain (each wait's result gates the next load): the static model charges each wave of blocks that many
  // DRAM latencies plus L2 ones, a floor beside the bandwidth. Unset: no such floor.
  std::function<LatencyChain(const Point&, const Shape&)> latency_chain;
  // Buffers for both kinds; launches for device families.
  std::function<LaunchPlan(const Point&, const Shape&)> plan;
  // Host families: the point prepared on `buffers` (inputs filled, outputs allocated); throws PointRejected.
  std::function<std::unique_ptr<HostKernel>(const Point&, const Shape&, HostBuffers& buffers)> host_prepare;

  // Inputs for `shape` from `seed`, deterministic; the CPU reference with its tolerance per output.
  std::function<HostBuffers(const Shape&, uint64_t seed)> make_inputs;
  std::function<std::vector<Expected>(const Shape&, const HostBuffers& inputs)> reference;
  // Families whose reference is a matrix product also describe it as one (set_linear_reference in
  // family_util.h makes `reference` these two on the CPU): the operands, and the expectations from their sums.
  std::function<LinearOperands(const Shape&, const HostBuffers& inputs)> linear_operands;
  std::function<std::vector<Expected>(const Shape&, const HostBuffers& inputs, const LinearSums&)> linear_expected;

  // The shapes a model needs from this family (weights may be null when only the config is known).
  std::function<std::vector<Shape>(const ModelConfig&, const ModelWeights*)> model_shapes;
  // A shape every point accepts (static analysis reads block size and dynamic smem from its plan), and the
  // shapes every default point is verified on in CI.
  Shape probe_shape;
  std::vector<Shape> test_shapes;

  // SHA-256 over the family's source files, computed at build time (cmake/HashSources.cmake).
  std::string source_hash;

  bool on_host() const { return static_cast<bool>(host_prepare); }
  Shape shape(std::vector<int64_t> values, std::string label = "") const;  // checks the count of dims
  // Its dims taken by name from another family's shape (a linear shape M, N, K, G as a dequant's N, K, G);
  // throws qt::Error naming a dim the other shape lacks.
  Shape shape_from(const Shape& other) const;
  std::vector<Point> default_points() const;
  std::vector<Point> default_points(const Shape& shape) const;  // in defaults_for's order when set
  Point default_point() const;
  bool serves(WeightType t) const;
  const ScalarSpec& scalar(std::string_view name) const;  // throws qt::Error naming an undeclared scalar
};

// `leaders` in their order, then the points of `all` not among them in theirs: how a defaults_for puts the
// points its rule prefers for a shape ahead of the others, each default written once.
std::vector<Point> lead_with(const std::vector<Point>& leaders, const std::vector<Point>& all);

// Every point of the Cartesian product of the parameter values that satisfies point_constraint.
std::vector<Point> enumerate_points(const KernelFamily& f);
// Throws qt::Error if the point names an unknown parameter, misses one, or uses a value not in the space.
void validate_point(const KernelFamily& f, const Point& p);
// "bm=16,bn=64" or "isa=avx2" -> Point (validated against the family).
Point parse_point(const KernelFamily& f, const std::string& text);
// The value a labelled parameter gives `label`; nullopt when it has no such label.
std::optional<int64_t> label_value(const Param& p, std::string_view label);
// A parameter value as written for users and stores: its label, or the number.
std::string value_text(const Param& p, int64_t value);

// Compares results (raw bytes in the buffer's dtype) with the expectation; returns "" on success or a
// message naming the buffer, the first bad index, the values and the number of mismatches.
std::string compare_output(const BufferSpec& spec, const std::vector<uint8_t>& got, const Expected& want);

// "<weight>x<activation>-><output>", the operand types of a linear family, e.g. "q8_0xf32->f32".
std::string linear_dtypes(WeightType w, DType activation, DType output);

// "" when `f` runs point `p` at `shape` (its point and shape constraints hold), else the first reason.
std::string point_runs(const KernelFamily& f, const Point& p, const Shape& shape);

// The family's default points (for `shape`) that differ from `point` in one parameter alone, one marked
// report_ab, and run at `shape`; each with that parameter's name and value as written (value_text): the A/Bs
// a family's defaults name for a report to measure beside the point.
struct Neighbour {
  std::string param, value;
  Point point;
};
std::vector<Neighbour> one_parameter_neighbours(const KernelFamily& f, const Point& point, const Shape& shape);

// ---- what a plan moves, for the static model ----
// The activations of a linear plan, by the name every family gives them: "x", or its int8 copy "xq" with
// its scales "xs".
bool is_activation_buffer(const std::string& name);
// A linear plan's weights: every input but the activations and an expert routing's ids.
bool is_weight_buffer(const BufferSpec& b);
bool launch_reads(const Launch& l, const std::string& buffer);  // the buffer is among its arguments
// Each buffer of the plan once, workspaces twice (written, then read back).
double plan_bytes_moved(const LaunchPlan& plan);
// The launch that does a plan's work: the first that reads an input other than the activations (a GEMM
// beside its split's reduction or its activations' quantization); else the widest.
size_t main_launch(const LaunchPlan& plan);

}  // namespace qt::kernels
