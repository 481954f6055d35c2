#include "kernels_src/fraglinear/frag_family.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <cmath>
#include <random>
#include <deque>
#include <sstream>

#include "common/error.h"
#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/awq/awq_family.h"
#include "kernels_src/fraglinear/frag_smem_sizes.h"
#include "kernels_src/fraglinear/frag_stream_sizes.h"
#include "kernels_src/fraglinear/frag_wgmma_sizes.h"
#include "common/parallel_ranges.h"
#include "kernels_src/awq/awq_reference.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/gate_up/gate_up_family.h"
#include "kernels_src/q8_0/q8_family.h"
#include "kernels_src/q8_0/q8_reference.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::frag {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kLinearDims = {"M", "N", "K", "G"};
const std::vector<std::string> kRepackDims = {"N", "K", "G"};

// A problem in the weights' file layout (the arrays under their file names, as a model file holds them), plus
// x, of one of the source kinds below.
struct SourceKind;
struct Source {
  const SourceKind* kind = nullptr;
  int64_t m = 0, n = 0, k = 0, group = 0;
  std::vector<uint16_t> x;
  HostBuffers arrays;
  FragDims dims() const;
  // w = code * scale of row kk (K) and column nn (N): the integer (code - zero, or q) and its scale.
  int code(int64_t kk, int64_t nn) const;
  double scale(int64_t kk, int64_t nn) const;
  // The kind's array `i` (in kind->arrays' order). code() and scale() run once per weight, and a lookup by
  // name apiece was most of a linear reference's time (the H200 tune: 108 s of references). bind() points
  // this object at its own arrays; a copy, not bound to itself, looks them up by name.
  const std::vector<uint8_t>& array(size_t i) const;
  void bind();

 private:
  std::vector<const std::vector<uint8_t>*> bound_;
  const Source* bound_to_ = nullptr;
};

// Element `i` of a raw array of T.
template <class T>
T at(const std::vector<uint8_t>& a, int64_t i) {
  T v;
  std::memcpy(&v, a.data() + i * int64_t(sizeof(T)), sizeof(T));
  return v;
}

// A weight type the frag layout holds, as its families see it: each fact of the type written here once.
struct SourceArray {
  const char* name;  // the file's (weight_array_name)
  DType dtype;
  int64_t (*count)(const FragDims& d);
};
struct SourceKind {
  WeightType type;
  int bits;              // the frag layout's
  const char* prefix;    // of the family names
  const char* what;      // in summaries
  int repack_src;        // frag_repack.cuh's SRC (kFragSrc*) for this source
  std::vector<SourceArray> arrays;  // the codes first; "qzeros" and "scales" bound by name
  void (*make)(Source& s, uint64_t seed);  // random arrays and x for s's dimensions
  int (*code)(const Source& s, int64_t kk, int64_t nn);
  double (*scale)(const Source& s, int64_t kk, int64_t nn);
  FragWeights (*repack)(const Source& s);  // the CPU reference repack
  // The model's layers of this type, at batch m.
  std::vector<Shape> (*layer_shapes)(const ModelConfig& c, const ModelWeights* w, int64_t m);
};

int64_t per_weight(const FragDims& d) { return d.k * d.n; }
int64_t per_group(const FragDims& d) { return d.groups() * d.n; }
int64_t per_weight_word(const FragDims& d) { return d.k * d.n / 8; }
int64_t per_group_word(const FragDims& d) { return d.groups() * d.n / 8; }

// AWQ as the awq families make it.
const SourceKind& awq_kind() {
  static const SourceKind k{
    WeightType::AWQ_INT4, 4, "awq", "AWQ INT4", 0,
    {{"qweight", DType::I32, per_weight_word}, {"qzeros", DType::I32, per_group_word}, {"scales", DType::F16, per_group}},
    [](Source& s, uint64_t seed) {
      awq::AwqData d = awq::make_awq_data(s.m, s.n, s.k, s.group, seed);
      s.x = std::move(d.x);
      s.arrays = {{"qweight", bytes_of(d.qweight)}, {"qzeros", bytes_of(d.qzeros)}, {"scales", bytes_of(d.scales)}};
    },
    [](const Source& s, int64_t kk, int64_t nn) {
      const auto nib = [&](size_t name, int64_t row) {
        return int((uint32_t(at<int32_t>(s.array(name), row * (s.n / 8) + nn / 8)) >> awq_shift(nn % 8)) & 15u);
      };
      return nib(0, kk) - nib(1, kk / s.group);  // qweight, qzeros
    },
    [](const Source& s, int64_t kk, int64_t nn) {
      return double(half_bits_to_float(at<uint16_t>(s.array(2), kk / s.group * s.n + nn)));  // scales
    },
    [](const Source& s) {
      return repack_awq(s.dims(), from_bytes<int32_t>(s.arrays.at("qweight")).data(),
                        from_bytes<int32_t>(s.arrays.at("qzeros")).data(), from_bytes<uint16_t>(s.arrays.at("scales")).data());
    },
    [](const ModelConfig& c, const ModelWeights* w, int64_t m) {
      return awq::quantized_layer_shapes(c, w, WeightType::AWQ_INT4, m);
    }};
  return k;
}

// INT8 codes uniform over 0..255, scales in [0.0005, 0.005), x in [-1, 1).
const SourceKind& int8gw_kind() {
  static const SourceKind k{
    WeightType::INT8_GW_SYM, 8, "int8gw", "INT8 group-wise", 1,
    {{"q", DType::U8, per_weight}, {"scales", DType::F16, per_group}},
    [](Source& s, uint64_t seed) {
      std::mt19937_64 rng(seed);
      std::uniform_int_distribution<int> byte(0, 255);
      std::uniform_real_distribution<float> scale(0.0005f, 0.005f), act(-1.0f, 1.0f);
      std::vector<uint8_t> q(size_t(s.k * s.n));
      for (auto& v : q) v = uint8_t(byte(rng));
      std::vector<uint16_t> scales(size_t(s.k / s.group * s.n));
      for (auto& v : scales) v = float_to_half_bits(scale(rng));
      s.x.resize(size_t(s.m * s.k));
      for (auto& v : s.x) v = float_to_half_bits(act(rng));
      s.arrays = {{"q", q}, {"scales", bytes_of(scales)}};
    },
    [](const Source& s, int64_t kk, int64_t nn) { return int(s.array(0)[size_t(kk * s.n + nn)]) - 128; },  // q
    [](const Source& s, int64_t kk, int64_t nn) {
      return double(half_bits_to_float(at<uint16_t>(s.array(1), kk / s.group * s.n + nn)));  // scales
    },
    [](const Source& s) {
      return repack_int8(s.dims(), s.arrays.at("q").data(), from_bytes<uint16_t>(s.arrays.at("scales")).data());
    },
    [](const ModelConfig& c, const ModelWeights* w, int64_t m) {
      return awq::quantized_layer_shapes(c, w, WeightType::INT8_GW_SYM, m);
    }};
  return k;
}

// Q8_0 as the q8_0 families make it; its fp32 scales count as fp16-rounded (frag_layout.h): the definition
// the frag layout serves, stated here from the file's arrays, not from the repack's output.
const SourceKind& q8_0_kind() {
  static const SourceKind k{
    WeightType::Q8_0, 8, "q8_0", "Q8_0", 2,
    {{"q", DType::I8, per_weight}, {"scales", DType::F32, per_group}},
    [](Source& s, uint64_t seed) {
      q8_0::Q8Data d = q8_0::make_q8_data(s.m, s.n, s.k, s.group, seed);
      d.q.front() = -128;  // legal in the format, never drawn there: its biased code is 0
      s.x = std::move(d.x);
      s.arrays = {{"q", bytes_of(d.q)}, {"scales", bytes_of(d.scales)}};
    },
    [](const Source& s, int64_t kk, int64_t nn) { return int(int8_t(s.array(0)[size_t(nn * s.k + kk)])); },  // q
    [](const Source& s, int64_t kk, int64_t nn) {
      return double(round_to_half(at<float>(s.array(1), nn * (s.k / s.group) + kk / s.group)));  // scales
    },
    [](const Source& s) {
      return repack_q8_0(s.dims(), from_bytes<int8_t>(s.arrays.at("q")).data(),
                         from_bytes<float>(s.arrays.at("scales")).data());
    },
    q8_0::q8_layer_shapes};
  return k;
}

FragDims Source::dims() const { return {n, k, group, kind->bits}; }
int Source::code(int64_t kk, int64_t nn) const { return kind->code(*this, kk, nn); }
double Source::scale(int64_t kk, int64_t nn) const { return kind->scale(*this, kk, nn); }

const std::vector<uint8_t>& Source::array(size_t i) const {
  if (bound_to_ == this) return *bound_[i];
  return arrays.at(kind->arrays.at(i).name);
}

void Source::bind() {
  bound_.clear();
  for (const SourceArray& a : kind->arrays) bound_.push_back(&arrays.at(a.name));
  bound_to_ = this;
}

Source make_source(const SourceKind& kind, int64_t m, int64_t n, int64_t k, int64_t group, uint64_t seed) {
  Source s;
  s.kind = &kind, s.m = m, s.n = n, s.k = k, s.group = group;
  kind.make(s, seed);
  s.bind();
  return s;
}

// The source arrays under their file names, with `tag` in front ("" for a repack's inputs, "ref." where a
// linear family keeps them only for its reference).
void put_source(const Source& s, const std::string& tag, HostBuffers& out) {
  for (const auto& [name, bytes] : s.arrays) out[tag + name] = bytes;
}
Source get_source(const SourceKind& kind, int64_t m, const FragDims& d, const std::string& tag, const HostBuffers& in) {
  Source s;
  s.kind = &kind, s.m = m, s.n = d.n, s.k = d.k, s.group = d.group;
  for (const SourceArray& a : kind.arrays) s.arrays[a.name] = in.at(tag + a.name);
  if (in.count("x")) s.x = from_bytes<uint16_t>(in.at("x"));
  s.bind();
  return s;
}

// The model's layers of the kind's type as the runtime stores them in the frag layout: the q/k/v
// concatenation only where each part is whole 64-column tiles (DeviceWeights::add_concatenated; elsewhere the
// runtime runs three linears, whose shapes the list has already).
std::vector<Shape> stored_layer_shapes(const SourceKind& kind, const ModelConfig& c, const ModelWeights* w, int64_t m) {
  std::vector<Shape> out = kind.layer_shapes(c, w, m);
  if (c.q_dim() % kTileN == 0 && c.kv_dim() % kTileN == 0) return out;
  std::vector<Shape> kept;
  for (Shape s : out) {
    std::string label;
    std::stringstream parts(s.label);
    for (std::string part; std::getline(parts, part, '+');)
      if (part != "wq|wk|wv") label += (label.empty() ? "" : "+") + part;
    if (label.empty()) continue;
    s.label = label;
    kept.push_back(s);
  }
  return kept;
}

bool has_array(const SourceKind& kind, const std::string& name) {
  for (const SourceArray& a : kind.arrays)
    if (name == a.name) return true;
  return false;
}

std::string limits_check(const FragDims& d, int64_t m) {
  if (std::string e = frag_dims_check(d); !e.empty()) return e;
  constexpr int64_t kMaxI32 = INT32_MAX;
  if (m < 1) return "M must be positive";
  if (m > kMaxI32 / d.n || m > kMaxI32 / d.k || d.weight_words() > kMaxI32)
    return "M*N, M*K and the repacked words must stay below 2^31 (32-bit kernel indexing)";
  return "";
}

// ---- repack ------------------------------------------------------------------------------------------

// What every frag family states the same way: its name from the source's prefix, the weight type it serves,
// the shared source hash, its kernel source and lowest architecture. The caller sets the rest.
KernelFamily frag_family(const SourceKind& kind, const std::string& suffix, const std::string& op,
                         const std::vector<std::string>& dims, const std::string& source, int min_sm) {
  KernelFamily f;
  f.name = std::string(kind.prefix) + suffix;
  f.op = op;
  f.weight_types = {kind.type};
  f.dtypes = linear_dtypes(kind.type, DType::F16, DType::F16);
  f.dims = dims;
  f.source_hash = kFamilySourceHash;
  f.source = source;
  f.min_sm = min_sm;
  return f;
}

constexpr int64_t kRepackThreads = 256;

KernelFamily make_repack(const SourceKind& kind) {
  KernelFamily f = frag_family(kind, "_frag_repack", "repack", kRepackDims, "fraglinear/frag_repack.cuh", 75);
  f.dtypes = weight_type_name(kind.type) + std::string("->frag");
  f.summary = std::string(kind.what) + " -> frag layout (mma B fragments in 16-byte lane loads), once at load time";
  f.params = {{"threads", {128, 256}, kRepackThreads, "threads per block (one output word or scale each)"}};
  const int bits = kind.bits;
  f.shape_constraint = [bits](const Point&, const Shape& s) {
    return limits_check({s["N"], s["K"], s["G"], bits}, 1);
  };
  const std::string kernel = "frag_repack_kernel<" + std::to_string(kind.repack_src) + ", ";
  f.kernels = [kernel](const Point& p) { return std::vector<std::string>{kernel + std::to_string(p.at("threads")) + ">"}; };
  f.plan = [&kind, kernel](const Point& p, const Shape& shape) {
    const FragDims d{shape["N"], shape["K"], shape["G"], kind.bits};
    LaunchPlan plan;
    for (const SourceArray& a : kind.arrays) plan.buffers.push_back({a.name, a.dtype, a.count(d), Role::Input});
    // Outputs as bytes: the check is bit for bit.
    plan.buffers.push_back({"bq", DType::U8, d.weight_words() * 4, Role::Output});
    plan.buffers.push_back({"bs", DType::U8, d.scale_halves() * 2, Role::Output});
    const bool zeros = d.zero_words() > 0;
    if (zeros) plan.buffers.push_back({"bz", DType::U8, d.zero_words() * 4, Role::Output});
    Launch l;
    l.kernel = kernel + std::to_string(p.at("threads")) + ">";
    l.grid.x = uint32_t(cdiv(d.weight_words() + d.scale_halves() + d.zero_words(), p.at("threads")));
    l.block.x = uint32_t(p.at("threads"));
    l.args = {KernelArg::buf(kind.arrays.front().name),
              has_array(kind, "qzeros") ? KernelArg::buf("qzeros") : KernelArg::null(),
              KernelArg::buf("scales"),
              KernelArg::buf("bq"),
              KernelArg::buf("bs"),
              zeros ? KernelArg::buf("bz") : KernelArg::null(),
              KernelArg::i32(d.n),
              KernelArg::i32(d.k),
              KernelArg::i32(d.group)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [&kind](const Shape& shape, uint64_t seed) {
    HostBuffers in;
    put_source(make_source(kind, 1, shape["N"], shape["K"], shape["G"], seed), "", in);
    return in;
  };
  f.reference = [&kind](const Shape& shape, const HostBuffers& in) {
    const FragDims d{shape["N"], shape["K"], shape["G"], kind.bits};
    const FragWeights w = kind.repack(get_source(kind, 1, d, "", in));
    auto as_bytes = [](const auto& v, const char* name) {
      Expected e;
      e.buffer = name;
      for (uint8_t b : bytes_of(v)) e.values.push_back(float(b));
      return e;  // exact: tolerance 0
    };
    std::vector<Expected> out = {as_bytes(w.q, "bq"), as_bytes(w.scales, "bs")};
    if (d.zero_words() > 0) out.push_back(as_bytes(w.zeros, "bz"));
    return out;
  };
  f.model_shapes = [&kind](const ModelConfig& c, const ModelWeights* w) {
    std::vector<Shape> out;
    for (const Shape& s : stored_layer_shapes(kind, c, w, 1))
      out.push_back(Shape{kRepackDims, {s["N"], s["K"], s["G"]}, s.label});
    return out;
  };
  f.probe_shape = Shape{kRepackDims, {1024, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kRepackDims, {64, 4096, 128}, "Qwen3-8B K=4096, N cut to 64"},
                   Shape{kRepackDims, {128, 12288, 128}, "Qwen3-8B down_proj K=12288, N cut to 128"},
                   Shape{kRepackDims, {768, 2048, 128}, "Qwen3-30B-A3B expert w1/w3"},
                   Shape{kRepackDims, {2048, 768, 128}, "Qwen3-30B-A3B expert w2"},
                   Shape{kRepackDims, {80, 192, 64}, "odd: N=80 (a padded column tile), 3 groups of 64"},
                   Shape{kRepackDims, {8, 32, 16}, "odd: one fragment column, groups of 16"},
                   Shape{kRepackDims, {136, 96, 32}, "odd: N=136, groups of 32 (Q8_0's block)"}};
  return f;
}

// ---- dequant ------------------------------------------------------------------------------------------

std::string dequant_kernel(int bits, const Point& p) { return name_expr("frag_dequant_kernel", {bits, p.at("threads")}); }

KernelFamily make_dequant(const SourceKind& kind) {
  const int bits = kind.bits;
  KernelFamily f = frag_family(kind, "_frag_dequant", "dequant.frag", kRepackDims, "fraglinear/frag_dequant.cuh", 75);
  f.summary = std::string(kind.what) +
              " in the frag layout -> fp16 W[K][N] (the dequant + cuBLASLt path)";
  f.params = {{"threads", {64, 128, 256, 512}, 256, "threads per block (a warp per 16 x 64 tile)"}};
  f.shape_constraint = [bits](const Point&, const Shape& s) { return limits_check({s["N"], s["K"], s["G"], bits}, 1); };
  f.kernels = [bits](const Point& p) { return std::vector<std::string>{dequant_kernel(bits, p)}; };
  f.plan = [bits](const Point& p, const Shape& shape) {
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    LaunchPlan plan;
    plan.buffers = {{"bq", DType::I32, d.weight_words(), Role::Input}, {"bs", DType::F16, d.scale_halves(), Role::Input}};
    if (bits == 4) plan.buffers.push_back({"bz", DType::I32, d.zero_words(), Role::Input});
    plan.buffers.push_back({"w", DType::F16, d.k * d.n, Role::Output});
    Launch l;
    l.kernel = dequant_kernel(bits, p);
    l.grid.x = uint32_t(cdiv(d.k / kTileK * d.n_tiles() * 32, p.at("threads")));
    l.block.x = uint32_t(p.at("threads"));
    l.args = {KernelArg::buf("bq"),  KernelArg::buf("bs"), bits == 4 ? KernelArg::buf("bz") : KernelArg::null(),
              KernelArg::buf("w"),   KernelArg::i32(d.n),  KernelArg::i32(d.k),
              KernelArg::i32(d.group)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [&kind, bits](const Shape& shape, uint64_t seed) {
    const Source s = make_source(kind, 1, shape["N"], shape["K"], shape["G"], seed);
    const FragWeights w = kind.repack(s);
    HostBuffers in = {{"bq", bytes_of(w.q)}, {"bs", bytes_of(w.scales)}};
    if (bits == 4) in["bz"] = bytes_of(w.zeros);
    put_source(s, "ref.", in);  // the reference works from the file layout, independent of the repack
    return in;
  };
  f.reference = [&kind, bits](const Shape& shape, const HostBuffers& in) {
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    const Source s = get_source(kind, 1, d, "ref.", in);
    Expected e;
    e.buffer = "w";
    e.values.resize(size_t(d.k * d.n));
    for (int64_t kk = 0; kk < d.k; ++kk)
      for (int64_t nn = 0; nn < d.n; ++nn)
        e.values[size_t(kk * d.n + nn)] = round_to_half(float(double(s.code(kk, nn)) * s.scale(kk, nn)));
    return std::vector<Expected>{e};  // bit-exact: a code of at most 8 bits times an fp16 scale is exact in fp32
  };
  f.model_shapes = [&kind](const ModelConfig& c, const ModelWeights* w) {
    std::vector<Shape> out;
    for (const Shape& s : stored_layer_shapes(kind, c, w, 1))
      out.push_back(Shape{kRepackDims, {s["N"], s["K"], s["G"]}, s.label});
    return out;
  };
  f.probe_shape = Shape{kRepackDims, {1024, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kRepackDims, {128, 4096, 128}, "Qwen3-8B K=4096, N cut to 128"},
                   Shape{kRepackDims, {80, 192, 64}, "odd: N=80 (a padded column tile), 3 groups of 64"},
                   Shape{kRepackDims, {8, 32, 16}, "odd: one fragment column, groups of 16"}};
  return f;
}

// ---- linear ------------------------------------------------------------------------------------------

struct LinearKind {
  const SourceKind* src;
  bool gemv;  // gemv: MF = 1, scales folded per group (exact weights); gemm: fp16 weights (q - z) * s
};

// The GEMM's accumulators (32 per fragment row and tile) leave no room for a second tile without spills.
int64_t tiles_per_warp(const LinearKind& kind, const Point& p) { return kind.gemv ? p.at("tn") : 1; }

std::string linear_kernel(const LinearKind& kind, const Point& p) {
  return name_expr("frag_linear_kernel", {kind.src->bits, kind.gemv ? 1 : p.at("mf"), p.at("warps"), p.at("stages"),
                                          p.at("pf"), kind.gemv ? 1 : 0, p.at("bk"), tiles_per_warp(kind, p),
                                          kind.gemv ? p.at("zpf") : 0, kind.gemv ? p.at("ru") : 1});
}

int64_t lock_count(const FragDims& d, int64_t m) { return d.n_tiles() * cdiv(m, 16); }

// The product's operands: x as fp16 values, and each weight (code - zero) * scale exactly (gemv: a code of at
// most 8 bits times an fp16 scale fits fp32) or rounded to fp16 first, as the GEMM's fragments hold it.
LinearOperands linear_operands(const LinearKind& kind, const Shape& shape, const HostBuffers& in) {
  const int64_t m = shape["M"];
  const FragDims d{shape["N"], shape["K"], shape["G"], kind.src->bits};
  const Source s = get_source(*kind.src, m, d, "ref.", in);
  LinearOperands ops;
  ops.m = m, ops.n = d.n, ops.k = d.k;
  ops.a.resize(size_t(m * d.k));
  for (size_t i = 0; i < ops.a.size(); ++i) ops.a[i] = half_bits_to_float(s.x[i]);
  ops.w.resize(size_t(d.k * d.n));
  // Each weight decoded through its kind's arrays by name: tens of operations apiece, the most of a tuner
  // job's setup (the H200 tune: 108 s of references), so rows of K over every core.
  parallel_ranges(d.k, 32.0 * double(d.k) * double(d.n), [&](int64_t k0, int64_t k1) {
    for (int64_t kk = k0; kk < k1; ++kk)
      for (int64_t nn = 0; nn < d.n; ++nn) {
        const float v = float(double(s.code(kk, nn)) * s.scale(kk, nn));
        ops.w[size_t(kk * d.n + nn)] = kind.gemv ? v : round_to_half(v);
      }
  });
  return ops;
}

// The tolerance is awq_gemm's: fp32 accumulation in any order within 16 sqrt(K) roundings of the largest
// partial sum (bounded by sum |x w|), plus the fp16 output.
std::vector<Expected> linear_expected(const LinearKind& kind, const Shape& shape, const LinearSums& sums) {
  const int64_t m = shape["M"];
  const FragDims d{shape["N"], shape["K"], shape["G"], kind.src->bits};
  Expected y;
  y.buffer = "y";
  y.values = sums.y;
  y.abs_tol = 16.0 * std::sqrt(double(d.k)) * std::ldexp(1.0, -24) * max_of(sums.abs) + 1e-6;
  y.rel_tol = std::ldexp(1.0, -10);
  Expected locks;  // every split-K counter is back at zero for the next launch
  locks.buffer = "locks";
  locks.values.assign(size_t(lock_count(d, m)), 0.0f);
  return {y, locks};
}

// What every frag linear kernel takes (frag_linear.cuh and frag_stream_gemv.cuh share one signature): the
// buffers, and one launch whose arguments are set; the caller adds the kernel, grid, block and shared memory.
LaunchPlan frag_linear_plan(const FragDims& d, int64_t m, int64_t split) {
  LaunchPlan plan;
  plan.buffers = {{"x", DType::F16, m * d.k, Role::Input},
                  {"bq", DType::I32, d.weight_words(), Role::Input},
                  {"bs", DType::F16, d.scale_halves(), Role::Input}};
  if (d.zero_words() > 0) plan.buffers.push_back({"bz", DType::I32, d.zero_words(), Role::Input});
  plan.buffers.push_back({"locks", DType::I32, lock_count(d, m), Role::InOut});
  plan.buffers.push_back({"y", DType::F16, m * d.n, Role::Output});
  plan.buffers.push_back({"ws", DType::F32, split > 1 ? split * m * d.n : 1, Role::Workspace});
  Launch l;
  l.args = {KernelArg::buf("x"),     KernelArg::buf("bq"),
            KernelArg::buf("bs"),    d.zero_words() > 0 ? KernelArg::buf("bz") : KernelArg::null(),
            KernelArg::buf("y"),     KernelArg::buf("ws"),
            KernelArg::buf("locks"), KernelArg::i32(m),
            KernelArg::i32(d.n),     KernelArg::i32(d.k),
            KernelArg::i32(d.group)};
  plan.launches.push_back(l);
  return plan;
}

KernelFamily make_linear(LinearKind kind) {
  KernelFamily f = frag_family(*kind.src, kind.gemv ? "_frag_gemv" : "_frag_gemm", "linear.frag", kLinearDims,
                               "fraglinear/frag_linear.cuh", 80);
  f.summary = std::string(kind.gemv ? "decode GEMV, M <= 16" : "prefill GEMM") +
              " on the frag layout: B fragments from global in 16-byte evict-first loads, dequant in registers, "
              "swizzled cp.async A ring, split-K reduced in the same launch";
  if (kind.gemv) {
    f.params = {{"warps", {1, 2, 4, 8}, 2, "warps per block, each owning tn 64-column tiles"},
                {"bk", {32, 64}, 64, "columns of K per A stage (the group size must be a multiple)"},
                {"stages", {2, 3, 4}, 3, "cp.async stages of A"},
                {"pf", {1, 2, 4}, 2, "B tiles (16 x 64) each warp keeps in flight"},
                {"split", {1, 2, 4, 8, 16}, 8, "blocks along K (whole groups; reduced in the same launch)"},
                {"tn", {1, 2}, 1, "64-column tiles per warp, sharing its A fragments"},
                // The H200 runs put the default's body at about 12 us for 2 us of bytes at 4096 x 4096; waiting on
                // each group's zeros is one suspect (results/gpu-h200-2026-11-29). The model's latency chain (below)
                // prices it, unmeasured: every report times zpf = 1 beside the default.
                // Points stored before it ran zpf = 0 (tests/tuner/h200_fixture.h compares the machine code).
                {"zpf", {0, 1}, 0, "load the next group's scales and zeros a group ahead", {}, /*report_ab=*/true,
                 /*absent_value=*/0},
                // The split-K reduction's outputs summed at once by a thread. One at a time (ru = 1, what the H200
                // runs measured) the default's 32 outputs a thread at 16 rows wait in turn: 16 rows took 16 us
                // more than one row there. Points stored before ran ru = 1; every report times it beside 4.
                {"ru", {1, 4}, 4, "split-K reduction: outputs a thread sums at once, their loads in flight together",
                 {}, /*report_ab=*/true, /*absent_value=*/1}};
    f.defaults = {{{"warps", 2}, {"bk", 64}, {"stages", 3}, {"pf", 2}, {"split", 8}, {"tn", 1}, {"zpf", 0}, {"ru", 4}},
                  {{"warps", 4}, {"bk", 32}, {"stages", 4}, {"pf", 2}, {"split", 1}, {"tn", 1}, {"zpf", 0}, {"ru", 1}},
                  {{"warps", 4}, {"bk", 64}, {"stages", 2}, {"pf", 2}, {"split", 4}, {"tn", 1}, {"zpf", 0}, {"ru", 4}},
                  {{"warps", 2}, {"bk", 64}, {"stages", 3}, {"pf", 2}, {"split", 8}, {"tn", 2}, {"zpf", 0}, {"ru", 4}},
                  // Last, so never the untuned choice (the first refuses whatever it refuses): verified in CI, and
                  // each the report's A/B of one parameter against the first.
                  {{"warps", 2}, {"bk", 64}, {"stages", 3}, {"pf", 2}, {"split", 8}, {"tn", 1}, {"zpf", 1}, {"ru", 4}},
                  {{"warps", 2}, {"bk", 64}, {"stages", 3}, {"pf", 2}, {"split", 8}, {"tn", 1}, {"zpf", 0}, {"ru", 1}}};
  } else {
    f.params = {{"mf", {2, 4}, 2, "16-row fragments of M per block"},
                {"warps", {2, 4}, 4, "warps per block, each owning a 64-column tile"},
                {"bk", {32, 64}, 64, "columns of K per A stage (the group size must be a multiple)"},
                {"stages", {2, 3, 4}, 3, "cp.async stages of A"},
                {"pf", {1, 2, 4}, 2, "B tiles (16 x 64) each warp keeps in flight"},
                {"split", {1, 2, 4}, 1, "blocks along K (whole groups; reduced in the same launch)"}};
    f.defaults = {{{"mf", 2}, {"warps", 4}, {"bk", 64}, {"stages", 3}, {"pf", 2}, {"split", 1}},
                  {{"mf", 2}, {"warps", 4}, {"bk", 32}, {"stages", 4}, {"pf", 2}, {"split", 1}},
                  {{"mf", 2}, {"warps", 2}, {"bk", 32}, {"stages", 3}, {"pf", 2}, {"split", 2}}};
  }
  f.point_constraint = [kind](const Point& p) {
    if (p.at("pf") > p.at("bk") / 16) return std::string("pf must divide the k-steps of an A stage (bk / 16)");
    // One split has no reduction: ru would only name the same kernel twice.
    if (kind.gemv && p.at("split") == 1 && p.at("ru") != 1) return std::string("split=1 has no reduction: ru must be 1");
    if (p.at("pf") > kPadTiles) return std::string("pf exceeds the frag layout's padding tiles");
    // 32 accumulators per fragment row plus the B ring: keep clear of 255 registers.
    if (!kind.gemv && p.at("mf") == 4 && p.at("pf") > 1) return std::string("B ring too deep for mf=4");
    return std::string();
  };
  f.shape_constraint = [kind](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], kind.src->bits};
    if (std::string e = limits_check(d, m); !e.empty()) return e;
    if (d.group % p.at("bk")) return "the group size must be a multiple of bk=" + std::to_string(p.at("bk"));
    if (kind.gemv && m > 16) return std::string("GEMV serves M <= 16");
    if (p.at("split") > d.groups()) return std::string("split exceeds the number of groups along K");
    return std::string();
  };
  // The GEMM states no bytes_in_flight_per_warp for INT4 (the GEMV states its own, below): the compiler hoists the unrolled k-steps' loads of a
  // stage past the PF ring, and, without the latency chain the GEMV states below, stating PF (Spearman 0.57,
  // median error 41% on the H200 fixture) or max(PF, bk / 16) tiles (0.86, 28%) fit the measured points worse
  // than the model's generic figure (0.85, 18%). An INT8 tile is twice an
  // INT4 tile's bytes in the same loop, so twice that figure: with the generic one the model put the second H200
  // run's q8_0_frag_gemv at 1.4-2.2x its measured times (tests/tuner/test_roofline.cpp holds them); the GEMV
  // now states its stage's tiles, so this figure is the INT8 GEMM's.
  if (kind.src->bits == 8) f.bytes_in_flight_per_warp = [](const Point&) { return int64_t{2048}; };

  // The GEMV's block walks its K range as a chain. Each A stage's B loads issue together at its top (the hoisting
  // above), so a stage is one DRAM round trip; each INT4 group starts by waiting on its zeros, one more unless zpf
  // loaded them a group ahead; the prologue's first loads are one; a split's end (fence, arrival
  // atomic, vote, fence, the partials) is about three L2 round trips. On the H200 runs: 1,024 x 4,096 took 10.9 us
  // at pf 1 and at pf 4 alike, and tripling K added 1.9 us a group a block, three round trips of 0.6 us.
  // The reduction then sums ru outputs a thread at once: a DRAM latency each time, whatever the split count (the
  // H200 runs: 16 rows took 16.3 us more than one at 8 splits, 16.5 us more at 16 splits, 30 outputs a thread
  // more either way, about 0.55 us an output).
  if (kind.gemv)
    f.latency_chain = [bits = kind.src->bits](const Point& p, const Shape& shape) {
      const int64_t groups = shape["K"] / shape["G"], split = p.at("split");
      const int64_t per_block = cdiv(groups, split);
      // INT8 has no zeros, and its scales are read at the group's end: their load waits on nothing.
      const int64_t group_wait = bits == 4 && !p.at("zpf") ? 1 : 0;
      LatencyChain c;
      c.dram_rounds = double(1 + per_block * (shape["G"] / p.at("bk") + group_wait));
      if (split > 1) {
        const int64_t threads = 32 * p.at("warps");
        const int64_t outputs = std::min<int64_t>(16, shape["M"]) * 64 * p.at("warps") * p.at("tn");
        c.dram_rounds += double(cdiv(cdiv(outputs, threads), p.at("ru")));
        c.l2_rounds = 3;
      }
      return c;
    };
  // What a warp has in flight: a stage's bk / 16 B tiles of each of its tn column tiles, issued together at the
  // stage's top (the hoisting above). With the latency chain beside it this fits the H200 runs' frag GEMV rows
  // better than the generic figure did (third run's report: median error 27% -> 12%; the first run's store 19%
  // -> 22%, Spearman 0.87 both; INT8 on the third run: Spearman 0.60 -> 0.89).
  if (kind.gemv)
    f.bytes_in_flight_per_warp = [bits = kind.src->bits](const Point& p) {
      return int64_t(p.at("bk") / 16 * 512 * (bits / 4) * p.at("tn"));
    };
  f.kernels = [kind](const Point& p) { return std::vector<std::string>{linear_kernel(kind, p)}; };

  f.plan = [kind](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], kind.src->bits};
    const int64_t split = p.at("split");
    LaunchPlan plan = frag_linear_plan(d, m, split);
    Launch& l = plan.launches.front();
    l.kernel = linear_kernel(kind, p);
    const int64_t mf = kind.gemv ? 1 : p.at("mf");
    l.grid.x = uint32_t(cdiv(d.n_tiles(), p.at("warps") * tiles_per_warp(kind, p)));
    l.grid.y = uint32_t(cdiv(m, 16 * mf));
    l.grid.z = uint32_t(split);
    l.block.x = uint32_t(32 * p.at("warps"));
    l.dynamic_smem = linear_smem_bytes(kind.gemv ? Point{{"mf", 1}, {"stages", p.at("stages")}, {"bk", p.at("bk")}} : p);
    return plan;
  };
  set_tiled_bytes_reread(f);
  f.make_inputs = [kind](const Shape& shape, uint64_t seed) {
    const Source s = make_source(*kind.src, shape["M"], shape["N"], shape["K"], shape["G"], seed);
    const FragWeights w = kind.src->repack(s);
    HostBuffers in = {{"x", bytes_of(s.x)}, {"bq", bytes_of(w.q)}, {"bs", bytes_of(w.scales)}};
    if (!w.zeros.empty()) in["bz"] = bytes_of(w.zeros);
    in["locks"] = std::vector<uint8_t>(size_t(lock_count(s.dims(), s.m) * 4), 0);
    put_source(s, "ref.", in);  // the reference works from the file layout, independent of the repack
    return in;
  };
  set_linear_reference(
      f, [kind](const Shape& shape, const HostBuffers& in) { return linear_operands(kind, shape, in); },
      [kind](const Shape& shape, const HostBuffers&, const LinearSums& sums) { return linear_expected(kind, shape, sums); });
  const int64_t model_m = kind.gemv ? 1 : 256;
  f.model_shapes = [model_m, kind](const ModelConfig& c, const ModelWeights* w) {
    return stored_layer_shapes(*kind.src, c, w, model_m);
  };
  f.probe_shape = Shape{kLinearDims, {kind.gemv ? 8 : 64, 1024, 4096, 128}, "probe"};
  if (kind.gemv) {
    f.test_shapes = {Shape{kLinearDims, {1, 64, 4096, 128}, "Qwen3-8B K=4096 decode, N cut to 64"},
                     Shape{kLinearDims, {3, 128, 12288, 128}, "Qwen3-8B down_proj K=12288, M=3, N cut to 128"},
                     Shape{kLinearDims, {16, 768, 2048, 128}, "Qwen3-30B-A3B expert w1/w3, M=16"},
                     Shape{kLinearDims, {5, 2048, 768, 128}, "Qwen3-30B-A3B expert w2, M=5"},
                     Shape{kLinearDims, {7, 80, 512, 64}, "odd: N=80 (a padded column tile), M=7, 8 groups of 64"},
                     Shape{kLinearDims, {2, 136, 96, 32}, "odd: N=136, groups of 32 (the golden AWQ models' group)"}};
  } else {
    f.test_shapes = {Shape{kLinearDims, {17, 128, 4096, 128}, "Qwen3-8B K=4096 prefill: M=17, N cut to 128"},
                     Shape{kLinearDims, {33, 768, 2048, 128}, "Qwen3-30B-A3B expert w1/w3, M=33"},
                     Shape{kLinearDims, {70, 2048, 768, 128}, "Qwen3-30B-A3B expert w2, M=70"},
                     Shape{kLinearDims, {5, 200, 512, 64}, "odd: N=200 (a padded column tile), M=5, 8 groups"},
                     Shape{kLinearDims, {40, 72, 128, 32}, "odd: N=72, M=40, groups of 32"}};
  }
  return f;
}

// A family that computes `base`'s problem with another schedule: the same inputs, reference, model shapes and
// test shapes, so a tuner computes the reference once for both and CI verifies both on the same cases.
void share_problem(KernelFamily& f, const KernelFamily& base) {
  f.problem = base.problem_name();
  f.make_inputs = base.make_inputs;
  f.reference = base.reference;
  f.linear_operands = base.linear_operands;
  f.linear_expected = base.linear_expected;
  f.model_shapes = base.model_shapes;
  f.probe_shape = base.probe_shape;
  f.test_shapes = base.test_shapes;
}

// ---- streaming GEMV ---------------------------------------------------------------------------------

}  // namespace

namespace {

// The shared memory a block may opt into on sm_86 and sm_89, the least of the targets past sm_80 (device/arch
// states it per architecture; the families sit below the device layer and keep this one figure).
constexpr int64_t kSm86BlockSmemBytes = 99 * 1024;

}  // namespace

int64_t stream_ring(const Point& p) { return p.count("ring") ? p.at("ring") : 0; }

namespace {
// Whether a ring pf steps deep fits a whole number of trips in each group: the unrolled loops need it.
bool pf_divides_group_steps(const Point& p, int64_t group) { return (group / 16) % p.at("pf") == 0; }
}  // namespace

std::string stream_group_check(const Point& p, int64_t group) {
  if (stream_ring(p) || pf_divides_group_steps(p, group)) return std::string();
  return "pf=" + std::to_string(p.at("pf")) + " must divide the group's 16-row steps on the register ring (ring=0)";
}
int64_t stream_ring_kernel(const Point& p, int64_t group) {
  if (!stream_ring(p)) return 0;
  return pf_divides_group_steps(p, group) ? 1 : 2;
}
std::vector<std::string> stream_ring_kernel_names(const Point& p, const std::function<std::string(int64_t)>& name) {
  if (!stream_ring(p)) return {name(0)};
  return {name(1), name(2)};
}
bool is_stream_family(const KernelFamily& f) {
  return std::any_of(f.params.begin(), f.params.end(), [](const Param& q) { return q.name == "ring"; });
}
int64_t stream_ring_smem(int bits, const Point& p, int64_t tn, bool norm) {
  if (!stream_ring(p)) return 0;
  return frag_stream_sizes::ring_smem_bytes(bits, p.at("pf"), tn, norm, p.at("kw"));
}

namespace {

// A shared ring (the partial sums reuse it) or the register ring's partial sums in static shared memory, and
// 1 KB for the rest, within what a block may have on sm_86 and sm_89 (the fused norm's ring holds its weights too).
std::string stream_ring_smem_check(int bits, const Point& p, int64_t tn, bool norm = false) {
  const int64_t ring = stream_ring_smem(bits, p, tn, norm);
  const int64_t bytes = (ring ? ring : frag_stream_sizes::partial_sum_bytes(p.at("kw"), tn)) + 1024;
  if (bytes > kSm86BlockSmemBytes)
    return "the shared ring needs " + std::to_string(bytes) + " bytes of shared memory, over the " +
           std::to_string(kSm86BlockSmemBytes / 1024) + " KiB a block may have on sm_86 and sm_89";
  return std::string();
}

// Registers a point's rings and accumulators hold per lane (B tiles, A fragments, the fp32 sums and the
// group's partials, the unpacked zeros and scales): kept under what leaves ptxas room for addresses and
// temporaries within 255 (the frag_stream_gemv points at this bound compile without spills on sm_80-90). The
// shared ring (ring = 1) holds only the step being multiplied in registers, counted with the sums' margin.
int64_t stream_ring_registers(int bits, const Point& p) {
  const int64_t tn = p.at("tn"), pf = stream_ring(p) ? 0 : p.at("pf");
  return tn * pf * (bits == 4 ? 4 : 8) + 4 * pf + 64 * tn + (bits == 4 ? 16 : 0) * tn + 8 * tn;
}
constexpr int64_t kStreamRegisterBudget = 176;

// What a stream GEMV's warp has in flight: its ring's 16-byte loads a lane (one a tile for INT4, two for INT8),
// but at most three of them. The H200 runs time the stream GEMVs as if each warp kept about three loads a lane
// in flight, whatever the ring's depth: a ring of 8 INT4 tiles a warp streamed at about 2 TB/s with 8 warps an
// SM. Fitted on awq_frag_stream_gemv's 13 report rows (median error 32% -> 16%), the cap times the stream rows it
// was not fitted on within 4-14%: q8_0_frag_stream_gemv (22% -> 6%), gate|up's tuned point (43% -> 14%) and the
// routed MoE gate|up GEMV (36% -> 4%). Why three (the compiler's scoreboards, an SM's outstanding loads) is what
// the next run's ladder (kernels_src/memread, experiment H0) and H7 (pf 8 against 4) measure; until then it is a
// fitted figure, not a mechanism.
// The mechanism, read from the kernel's sm_90 SASS (30 Nov): every B load of the ring writes its registers under
// one scoreboard, and the first use of a slot waits for that scoreboard to empty, so each trip through the ring
// waits for all of it; about three of the eight tiles are in flight on average.
// The shared ring (ring = 1) waits per cp.async group, and the groups complete in order: pf - 1 steps' tiles stay
// in flight (frag_stream_gemv.cuh, RING). That figure is the design's, not yet a measurement.
constexpr int64_t kRingLoadsInFlight = 3;
int64_t stream_ring_bytes_in_flight(int bits, int64_t tiles) {
  return std::min(tiles * frag_stream_sizes::tile_pieces(bits), kRingLoadsInFlight) * 512;
}
int64_t stream_bytes_in_flight(int bits, const Point& p, int64_t tn) {
  if (stream_ring(p)) return (p.at("pf") - 1) * tn * frag_stream_sizes::tile_pieces(bits) * 512;
  return stream_ring_bytes_in_flight(bits, p.at("pf") * tn);
}


using Fusion = StreamFuse;

// Where a stream GEMV's ring lives. A choice GPU runs measure beside the default (report_ab) where the default's
// twin on the other ring is a point of the family (the register ring cannot be 8 deep in gate|up or the fused
// norm GEMV: experiments H6 and H8 time those): the static model's in-flight figure for the shared ring is the
// design's until a run times it.
Param stream_ring_param() {
  return {"ring", {0, 1}, 1,
          "where each warp's ring lives: 0 registers (one scoreboard: each trip waits for the whole ring), 1 shared "
          "memory through cp.async (each step waits for its own group)",
          {}, /*report_ab=*/true, /*absent_value=*/0};
}

// `ring`: the kernel's RING value (stream_ring_kernel).
std::string stream_kernel(int bits, const Point& p, int64_t ring, Fusion fuse = Fusion::kNone) {
  return stream_gemv_kernel(bits, p.at("kw"), p.at("pf"), p.at("tn"), false, fuse, StreamRoute::kNone, 1, ring);
}

// The streaming kernels' trailing arguments: the norm's weights and epsilon (kFuseNorm, kFuseResidualNorm),
// the MoE routing's (kernels_src/moe_stream, unread by every dense family), and kFuseResidualNorm's output.
constexpr size_t kStreamTailArgs = 10;
void add_tail_args(Launch& l, Fusion fuse) {
  const bool norm = fuse == Fusion::kNorm || fuse == Fusion::kResidualNorm;
  if (norm) l.args.insert(l.args.end(), {KernelArg::buf("nw"), KernelArg::scalar("eps")});
  else l.args.insert(l.args.end(), {KernelArg::null(), KernelArg::f32(0.0f)});
  l.args.insert(l.args.end(), {KernelArg::null(), KernelArg::null(), KernelArg::null(), KernelArg::null(),
                               KernelArg::i32(1), KernelArg::i32(1), KernelArg::i32(0)});
  l.args.push_back(fuse == Fusion::kResidualNorm ? KernelArg::buf("yn") : KernelArg::null());
}

KernelFamily make_stream_gemv(const SourceKind& kind, const KernelFamily& gemv) {
  const int bits = kind.bits;
  KernelFamily f = frag_family(kind, "_frag_stream_gemv", "linear.frag", kLinearDims, "fraglinear/frag_stream_gemv.cuh", 80);
  f.summary = "decode GEMV, M <= 16, for bytes in flight: kw warps split one column tile's K, each streaming "
              "pf B tiles and A fragments (in registers, or a per-lane cp.async ring in shared memory) with no "
              "barrier, split-K reduced in the same launch";
  f.params = {{"kw", {1, 2, 4, 8}, 4, "warps per block, each a share of the block's K range on the same tiles"},
              {"pf", {2, 4, 8}, 8, "B tiles (16 x 64) and A fragments in each warp's ring"},
              {"split", {1, 2, 4, 8, 16}, 4, "blocks along K (whole groups; reduced in the same launch)"},
              {"tn", {1, 2}, 1, "64-column tiles per block, sharing each A fragment"},
              stream_ring_param()};
  // Little's law on the H200 (about 25 KB in flight per SM): the first default puts 4-warp blocks of 7 INT4
  // tiles in flight a warp (14 KB per block) on a 4096 x 4096 layer's 64 x 4 blocks; its neighbour is the same
  // schedule on the register ring the H200 runs measured; the others serve deeper or narrower splits, and the
  // register ring at groups of 64 or 32 (its pf must divide G / 16; the shared ring runs across groups, so the first
  // default takes Q8_0's groups of 64 and 32 too), the last two each ring's at 2 deep.
  f.defaults = {{{"kw", 4}, {"pf", 8}, {"split", 4}, {"tn", 1}, {"ring", 1}},
                {{"kw", 4}, {"pf", 8}, {"split", 4}, {"tn", 1}, {"ring", 0}},
                {{"kw", 8}, {"pf", 4}, {"split", 2}, {"tn", 1}, {"ring", 0}},
                {{"kw", 4}, {"pf", 4}, {"split", 8}, {"tn", 1}, {"ring", 0}},
                {{"kw", 4}, {"pf", 2}, {"split", 4}, {"tn", 1}, {"ring", 0}},
                {{"kw", 4}, {"pf", 2}, {"split", 4}, {"tn", 1}, {"ring", 1}}};
  f.point_constraint = [bits](const Point& p) {
    // The warps' partial sums meet in static shared memory: (kw - 1) x 8 tn x 4 floats per lane.
    if (p.at("kw") * p.at("tn") > 8) return std::string("kw x tn must be at most 8 (static shared memory)");
    if (stream_ring_registers(bits, p) > kStreamRegisterBudget)
      return "rings and accumulators need " + std::to_string(stream_ring_registers(bits, p)) +
             " registers per lane, over " + std::to_string(kStreamRegisterBudget);
    return stream_ring_smem_check(bits, p, p.at("tn"));
  };
  f.shape_constraint = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    if (std::string e = limits_check(d, m); !e.empty()) return e;
    if (m > 16) return std::string("GEMV serves M <= 16");
    if (std::string e = stream_group_check(p, d.group); !e.empty()) return e;
    if (p.at("split") > d.groups()) return std::string("split exceeds the number of groups along K");
    return std::string();
  };
  // Each warp's ring: pf B tiles per column tile, 16 bytes per lane and load (INT4 one load, INT8 two).
  f.bytes_in_flight_per_warp = [bits](const Point& p) { return stream_bytes_in_flight(bits, p, p.at("tn")); };
  f.kernels = [bits](const Point& p) {
    return stream_ring_kernel_names(p, [&](int64_t ring) { return stream_kernel(bits, p, ring); });
  };
  f.plan = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    const int64_t split = p.at("split");
    LaunchPlan plan = frag_linear_plan(d, m, split);
    Launch& l = plan.launches.front();
    l.kernel = stream_kernel(bits, p, stream_ring_kernel(p, d.group));
    l.dynamic_smem = stream_ring_smem(bits, p, p.at("tn"), false);
    add_tail_args(l, Fusion::kNone);
    l.grid.x = uint32_t(cdiv(d.n_tiles(), p.at("tn")));
    l.grid.y = uint32_t(cdiv(m, 16));
    l.grid.z = uint32_t(split);
    l.block.x = uint32_t(32 * p.at("kw"));
    return plan;
  };
  // The same problem, inputs and reference as the frag GEMV: only the schedule differs.
  share_problem(f, gemv);
  f.test_shapes.push_back(Shape{kLinearDims, {1, 192, 2048, 128}, "more warps than groups: kw x split over 16 groups"});
  f.test_shapes.push_back(Shape{kLinearDims, {3, 128, 480, 16}, "groups of 16, a step each: the shared ring across them"});
  return f;
}

// ---- gate + up + SwiGLU in one streaming GEMV ---------------------------------------------------------

std::string gate_up_kernel(int bits, const Point& p, int64_t ring, Fusion fuse = Fusion::kNone) {
  return stream_gemv_kernel(bits, p.at("kw"), p.at("pf"), 2, true, fuse, StreamRoute::kNone, 1, ring);
}

// x of the source behind a linear problem's inputs, as fp32 values [M][K].
std::vector<double> source_activations(const SourceKind& kind, int64_t m, int64_t n, const Shape& shape,
                                       const HostBuffers& in) {
  const Source s = get_source(kind, m, FragDims{n, shape["K"], shape["G"], kind.bits}, "ref.", in);
  std::vector<double> a(s.x.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = half_bits_to_float(s.x[i]);
  return a;
}

// h = silu(a Wg) * (a Wu) over activations `a` [M][K], with `extra` added to the fp32 sums' relative error bound
// (an fp16 rounding of the activations that `a` does not carry).
std::vector<Expected> gate_up_reference(const SourceKind& kind, const Shape& shape, const HostBuffers& in,
                                        const std::vector<double>& a, double extra) {
  const int64_t m = shape["M"], h = shape["N"];
  const FragDims d{2 * h, shape["K"], shape["G"], kind.bits};
  const Source s = get_source(kind, m, d, "ref.", in);
  gate_up::Projections p;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < h; ++c) {
      double g = 0, ga = 0, u = 0, ua = 0;
      for (int64_t k = 0; k < d.k; ++k) {
        const double xv = a[size_t(r * d.k + k)];
        // Each weight rounded to fp16 once, as the kernel scales it before its mma.
        const double wg = round_to_half(float(s.code(k, c) * s.scale(k, c)));
        const double wu = round_to_half(float(s.code(k, h + c) * s.scale(k, h + c)));
        g += xv * wg, ga += std::abs(xv * wg), u += xv * wu, ua += std::abs(xv * wu);
      }
      p.g.push_back(g), p.g_abs.push_back(ga), p.u.push_back(u), p.u_abs.push_back(ua);
    }
  Expected locks;  // every split-K counter is back at zero for the next launch
  locks.buffer = "locks";
  locks.values.assign(size_t(lock_count(d, m)), 0.0f);
  return std::vector<Expected>{gate_up::swiglu_expected(p, gate_up::fp32_sum_error(d.k) + extra), locks};
}

// The gate and up projections as one problem: a Source of 2H columns, gate in 0..H-1, up in H..2H-1 (the
// device stores the pair concatenated so), with H the shape's N.
KernelFamily make_gate_up_stream(const SourceKind& kind) {
  const int bits = kind.bits;
  KernelFamily f = frag_family(kind, "_frag_gate_up_swiglu", "gate_up_swiglu.frag", kLinearDims,
                               "fraglinear/frag_stream_gemv.cuh", 80);
  f.summary = "decode MLP front, M <= 16: h = silu(x Wg) * (x Wu) as one streaming GEMV over [gate | up] in the "
              "frag layout, each block a gate tile and its up tile, SwiGLU in the epilogue";
  // Two tiles' sums and rings: pf = 8 in registers spills on sm_80-90 (NVRTC 13.0: 255 registers), pf = 4 fits
  // in 254, and kw x 2 tiles of partials fill the static shared memory at kw = 4. The shared ring holds no tiles
  // in registers (210 at pf = 8 on sm_90), so it can be 8 deep.
  f.params = {{"kw", {1, 2, 4}, 4, "warps per block, each a share of the block's K range on the same two tiles"},
              {"pf", {2, 4, 8}, 4, "B tiles (16 x 64) per tile and A fragments in each warp's ring"},
              {"split", {1, 2, 4, 8, 16}, 4, "blocks along K (whole groups; reduced in the same launch)"},
              stream_ring_param()};
  f.point_constraint = [bits](const Point& p) {
    if (!stream_ring(p) && p.at("pf") > 4) return std::string("pf=8 in registers spills (two tiles' rings)");
    return stream_ring_smem_check(bits, p, 2);
  };
  // 8-bit tiles are twice as large: 8 deep, their shared ring takes 80 KiB a block (the partial sums reuse it).
  f.defaults = {{{"kw", 4}, {"pf", 8}, {"split", 4}, {"ring", 1}},
                {{"kw", 4}, {"pf", 4}, {"split", 4}, {"ring", 0}},
                {{"kw", 4}, {"pf", bits == 4 ? 4 : 2}, {"split", 4}, {"ring", 1}},
                {{"kw", 2}, {"pf", 2}, {"split", 1}, {"ring", 0}}};
  f.shape_constraint = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"], h = shape["N"];
    const FragDims d{2 * h, shape["K"], shape["G"], bits};
    if (std::string e = limits_check(d, m); !e.empty()) return e;
    if (h % 64) return std::string("N (each projection's columns) must be whole 64-column tiles");
    if (m > 16) return std::string("GEMV serves M <= 16");
    if (std::string e = stream_group_check(p, d.group); !e.empty()) return e;
    if (p.at("split") > d.groups()) return std::string("split exceeds the number of groups along K");
    return std::string();
  };
  f.bytes_in_flight_per_warp = [bits](const Point& p) { return stream_bytes_in_flight(bits, p, 2); };
  f.kernels = [bits](const Point& p) {
    return stream_ring_kernel_names(p, [&](int64_t ring) { return gate_up_kernel(bits, p, ring); });
  };
  f.plan = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"], h = shape["N"];
    const FragDims d{2 * h, shape["K"], shape["G"], bits};
    const int64_t split = p.at("split");
    LaunchPlan plan = frag_linear_plan(d, m, split);
    for (BufferSpec& b : plan.buffers)
      if (b.name == "y") b = {"h", DType::F16, m * h, Role::Output};
    Launch& l = plan.launches.front();
    for (KernelArg& a : l.args)
      if (a.kind == KernelArg::Kind::Buffer && a.buffer == "y") a = KernelArg::buf("h");
    l.kernel = gate_up_kernel(bits, p, stream_ring_kernel(p, d.group));
    l.dynamic_smem = stream_ring_smem(bits, p, 2, false);
    add_tail_args(l, Fusion::kNone);
    l.grid.x = uint32_t(h / 64);
    l.grid.y = uint32_t(cdiv(m, 16));
    l.grid.z = uint32_t(split);
    l.block.x = uint32_t(32 * p.at("kw"));
    return plan;
  };
  f.make_inputs = [&kind](const Shape& shape, uint64_t seed) {
    const Source s = make_source(kind, shape["M"], 2 * shape["N"], shape["K"], shape["G"], seed);
    const FragWeights w = kind.repack(s);
    HostBuffers in = {{"x", bytes_of(s.x)}, {"bq", bytes_of(w.q)}, {"bs", bytes_of(w.scales)}};
    if (!w.zeros.empty()) in["bz"] = bytes_of(w.zeros);
    in["locks"] = std::vector<uint8_t>(size_t(lock_count(s.dims(), s.m) * 4), 0);
    put_source(s, "ref.", in);  // the reference works from the file layout, independent of the repack
    return in;
  };
  f.reference = [&kind](const Shape& shape, const HostBuffers& in) {
    return gate_up_reference(kind, shape, in, source_activations(kind, shape["M"], 2 * shape["N"], shape, in), 0.0);
  };
  // The dense MLP's gate (w1) and up (w3) share a linear shape; the runtime concatenates them at load.
  f.model_shapes = [&kind](const ModelConfig& c, const ModelWeights* w) {
    const WeightType t = kind.type;
    return linear_family_shapes(
        c, w, 1,
        [t](const LinearShape& l) {
          return !l.expert && l.label.find("w1") != std::string::npos && (!l.type || *l.type == t);
        },
        [&c](const LinearShape& l) { return l.type ? l.group : c.group_size > 0 ? int64_t(c.group_size) : 128; });
  };
  f.probe_shape = Shape{kLinearDims, {1, 1024, 4096, 128}, "probe"};
  f.test_shapes = {Shape{kLinearDims, {1, 128, 4096, 128}, "Qwen3-8B w1+w3 decode, N cut to 128"},
                   Shape{kLinearDims, {3, 64, 2048, 128}, "M=3, K=2048, N cut to 64"},
                   Shape{kLinearDims, {16, 192, 512, 32}, "M=16, groups of 32 (the golden AWQ models' group)"},
                   Shape{kLinearDims, {3, 64, 480, 16}, "groups of 16, a step each: the shared ring across them"}};
  return f;
}

// ---- RMSNorm and the residual add fused into the streaming GEMVs ------------------------------------------
// The same schedules as the stream GEMV and gate|up families, on problems that include their neighbours in a
// decode step (frag_stream_gemv.cuh's FUSE): the norm before q|k|v and gate|up, the residual add after o_proj
// and down_proj. Their parameters are the base family's, and the runtime runs a fused family at the point it
// chose for the base (a tuned stream GEMV's schedule, the same loads and sums), so a tune measures each
// schedule once; these families carry no model shapes of their own.

constexpr double kNormTestEps = 1e-6;

// x's rows RMS-normalized in double with weights nw: the exact activations the fused kernel rounds to fp16.
std::vector<double> rms_normalized(std::vector<double> x, int64_t m, int64_t k, const std::vector<float>& nw, double eps) {
  for (int64_t r = 0; r < m; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < k; ++c) ss += x[size_t(r * k + c)] * x[size_t(r * k + c)];
    const double inv = 1.0 / std::sqrt(ss / double(k) + eps);
    for (int64_t c = 0; c < k; ++c) x[size_t(r * k + c)] *= double(nw[size_t(c)]) * inv;
  }
  return x;
}

// RMSNorm weights in [0.25, 2), as a trained model's are positive and near 1.
std::vector<uint8_t> norm_weights(int64_t k, uint64_t seed) {
  Rng rng(seed ^ 0x6e6f726dull);
  std::vector<float> w(static_cast<size_t>(k));
  for (float& v : w) v = float(0.25 + 1.75 * rng.uniform());
  return bytes_of(w);
}

// fp16 rows of `len` values with row r scaled by 2^(r % 4), exact in fp16: rows whose RMS differ 1, 2, 4 and 8x.
// i.i.d. rows' RMS differ by about 0.6 / sqrt(len), within the tolerance at 4096 values, so a kernel applying
// one row's 1 / rms to another would pass on them.
std::vector<uint8_t> rows_of_distinct_rms(const std::vector<uint8_t>& rows, int64_t len) {
  std::vector<uint16_t> v = from_bytes<uint16_t>(rows);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float_to_half_bits(half_bits_to_float(v[i]) * float(1 << ((int64_t(i) / len) % 4)));
  return bytes_of(v);
}

// The RMSNorm of the expected rows `y` [m][n] with weights nw: each within y's tolerance moves its row's output by
// at most nw * inv times it, twice over (the value and its share of the row's RMS); plus the output's rounding.
Expected expect_rmsnorm(const Expected& y, int64_t m, int64_t n, const std::vector<float>& nw) {
  Expected out;
  out.buffer = "yn";
  double tol = 0;
  for (int64_t r = 0; r < m; ++r) {
    double ss = 0, largest = 0;
    for (int64_t c = 0; c < n; ++c) {
      const double v = y.values[size_t(r * n + c)];
      ss += v * v, largest = std::max(largest, std::abs(v));
    }
    const double inv = 1.0 / std::sqrt(ss / double(n) + kNormTestEps);
    for (int64_t c = 0; c < n; ++c) out.values.push_back(float(nw[size_t(c)] * y.values[size_t(r * n + c)] * inv));
    tol = std::max(tol, 2.0 * 2.0 * inv * (y.abs_tol + y.rel_tol * largest));  // nw < 2
  }
  out.abs_tol = tol;
  out.rel_tol = std::ldexp(1.0, -10);
  return out;
}

// The base's plan with the fused kernel, its extra input and its output's role.
LaunchPlan fused_plan(const KernelFamily& base, Fusion fuse, bool swiglu, int bits, const Point& p, const Shape& shape) {
  LaunchPlan plan = base.plan(p, shape);
  Launch& l = plan.launches.front();
  const int64_t ring = stream_ring_kernel(p, shape["G"]);
  l.kernel = swiglu ? gate_up_kernel(bits, p, ring, fuse) : stream_kernel(bits, p, ring, fuse);
  l.dynamic_smem = stream_ring_smem(bits, p, swiglu ? 2 : p.at("tn"), fuse == Fusion::kNorm);
  l.args.resize(l.args.size() - kStreamTailArgs);
  add_tail_args(l, fuse);
  if (fuse == Fusion::kNorm) plan.buffers.push_back({"nw", DType::F32, shape["K"], Role::Input});
  if (fuse == Fusion::kResidual || fuse == Fusion::kResidualNorm)
    for (BufferSpec& b : plan.buffers)
      if (b.name == "y") b.role = Role::InOut;
  if (fuse == Fusion::kResidualNorm) {
    plan.buffers.push_back({"nw", DType::F32, shape["N"], Role::Input});
    plan.buffers.push_back({"yn", DType::F16, shape["M"] * shape["N"], Role::Output});
    for (BufferSpec& b : plan.buffers)  // one more arrival counter per 16 rows: the rows' norm
      if (b.name == "locks") b.elements += cdiv(shape["M"], 16);
  }
  return plan;
}

KernelFamily make_fused_stream(const SourceKind& kind, const KernelFamily& base, Fusion fuse) {
  const bool swiglu = base.op == "gate_up_swiglu.frag";
  const int bits = kind.bits;
  KernelFamily f = base;
  f.problem.clear();
  f.model_shapes = nullptr;
  const std::string part = swiglu                          ? "_frag_norm_gate_up_swiglu"
                           : fuse == Fusion::kNorm         ? "_frag_norm_gemv"
                           : fuse == Fusion::kResidualNorm ? "_frag_residual_norm_gemv"
                                                           : "_frag_residual_gemv";
  f.name = std::string(kind.prefix) + part;
  f.op = swiglu                          ? kNormGateUpOp
         : fuse == Fusion::kNorm         ? kNormLinearOp
         : fuse == Fusion::kResidualNorm ? kResidualNormOp
                                         : kResidualOp;
  f.summary = fuse == Fusion::kNorm
                  ? "RMSNorm of the hidden state fused into " + base.name + " (each block its rows' statistics)"
              : fuse == Fusion::kResidualNorm
                  ? base.name + " adding its output to the hidden state in place, then the last block of its rows "
                                "writing their RMSNorm (the residual add and the norm after it fused)"
                  : base.name + " adding its output to the hidden state in place (the residual add fused)";
  if (fuse == Fusion::kNorm || fuse == Fusion::kResidualNorm) f.scalars = {{"eps", DType::F32, kNormTestEps}};
  if (fuse == Fusion::kNorm) {
    // The norm's A loads beside a ring of 8 INT4 tiles in registers: 12 bytes of spills on sm_90 (NVRTC 13.0).
    const auto base_constraint = base.point_constraint;
    f.point_constraint = [base_constraint, swiglu, bits](const Point& p) {
      if (std::string why = base_constraint ? base_constraint(p) : std::string(); !why.empty()) return why;
      if (!swiglu && !stream_ring(p) && p.at("pf") > 4)
        return std::string("the normalizing GEMV's register ring holds at most 4 tiles (pf=8 spills)");
      return stream_ring_smem_check(bits, p, swiglu ? 2 : p.at("tn"), true);
    };
    std::vector<Point> kept;
    for (const Point& p : f.defaults)
      if (f.point_constraint(p).empty()) kept.push_back(p);
    f.defaults = kept;
  }
  f.kernels = [bits, swiglu, fuse](const Point& p) {
    return stream_ring_kernel_names(p, [&](int64_t ring) {
      return swiglu ? gate_up_kernel(bits, p, ring, fuse) : stream_kernel(bits, p, ring, fuse);
    });
  };
  f.plan = [base, fuse, swiglu, bits](const Point& p, const Shape& shape) {
    return fused_plan(base, fuse, swiglu, bits, p, shape);
  };
  f.make_inputs = [base, fuse](const Shape& shape, uint64_t seed) {
    HostBuffers in = base.make_inputs(shape, seed);
    if (fuse == Fusion::kNorm) {
      in["nw"] = norm_weights(shape["K"], seed);
      in["x"] = rows_of_distinct_rms(in.at("x"), shape["K"]);
    } else {
      in["y"] = residual_input(shape["M"] * shape["N"], seed);
    }
    if (fuse == Fusion::kResidualNorm) {
      in["nw"] = norm_weights(shape["N"], seed);
      in["y"] = rows_of_distinct_rms(in.at("y"), shape["N"]);
      in["locks"].resize(in["locks"].size() + size_t(cdiv(shape["M"], 16)) * 4, 0);
    }
    return in;
  };
  // The norm's fp16 rounding of each activation moves a sum by at most 2^-11 sum |a w|.
  const double rounding = std::ldexp(1.0, -11);
  if (swiglu) {
    f.linear_operands = nullptr;
    f.linear_expected = nullptr;
    f.reference = [&kind, rounding](const Shape& shape, const HostBuffers& in) {
      const int64_t m = shape["M"], k = shape["K"];
      const std::vector<double> a = rms_normalized(source_activations(kind, m, 2 * shape["N"], shape, in), m, k,
                                                   from_bytes<float>(in.at("nw")), kNormTestEps);
      return gate_up_reference(kind, shape, in, a, rounding);
    };
    return f;
  }
  const auto operands = base.linear_operands;
  const auto expected = base.linear_expected;
  set_linear_reference(
      f,
      [operands, fuse](const Shape& shape, const HostBuffers& in) {
        LinearOperands ops = operands(shape, in);
        if (fuse != Fusion::kNorm) return ops;
        const std::vector<double> a = rms_normalized(std::vector<double>(ops.a.begin(), ops.a.end()), ops.m, ops.k,
                                                     from_bytes<float>(in.at("nw")), kNormTestEps);
        for (size_t i = 0; i < a.size(); ++i) ops.a[i] = float(a[i]);
        return ops;
      },
      [expected, fuse, rounding](const Shape& shape, const HostBuffers& in, const LinearSums& sums) {
        std::vector<Expected> out = expected(shape, in, sums);
        std::vector<Expected> normalized;
        for (Expected& e : out) {
          if (e.buffer == "locks" && fuse == Fusion::kResidualNorm)
            e.values.resize(e.values.size() + size_t(cdiv(shape["M"], 16)), 0.0f);
          if (e.buffer != "y") continue;
          if (fuse == Fusion::kNorm) e.abs_tol += rounding * max_of(sums.abs);
          else expect_residual_add(e, in.at("y"));
          if (fuse == Fusion::kResidualNorm)
            normalized.push_back(expect_rmsnorm(e, shape["M"], shape["N"], from_bytes<float>(in.at("nw"))));
        }
        out.insert(out.end(), normalized.begin(), normalized.end());
        return out;
      });
  return f;
}

// ---- Hopper GEMM (wgmma) -------------------------------------------------------------------------------

std::string wgmma_kernel(int bits, const Point& p) {
  if (p.at("sk") > 0)
    return name_expr("frag_wgmma_streamk_kernel", {bits, p.at("bm"), p.at("wg"), p.at("stages"), p.at("pf"), p.at("kif")});
  return name_expr("frag_wgmma_gemm_kernel",
                   {bits, p.at("bm"), p.at("wg"), p.at("stages"), p.at("pf"), p.at("kif"), p.at("cluster")});
}

// Stream-K's units at a shape: (column block of 256 features, BM rows) tiles times 64-column chunks of K.
int64_t streamk_units(const FragDims& d, int64_t m, int64_t bm) { return cdiv(d.n_tiles(), 4) * cdiv(m, bm) * cdiv(d.k, 64); }

// How many partial tiles `blocks` stream-K blocks write (frag_wgmma_streamk_kernel's ranges): at each end of a
// block's range, the tile it begins or ends inside of.
int64_t streamk_partials(int64_t units, int64_t blocks, int64_t chunks) {
  int64_t partials = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * units / blocks, end = (b + 1) * units / blocks;
    const int64_t first = begin / chunks, last = (end - 1) / chunks;
    partials += begin % chunks != 0 || end < (first + 1) * chunks;  // the tile its range begins in
    if (last != first) partials += end % chunks != 0;               // the tile it ends in
  }
  return partials;
}

KernelFamily make_wgmma_gemm(const SourceKind& kind, const KernelFamily& gemm) {
  const int bits = kind.bits;
  KernelFamily f = frag_family(kind, "_frag_wgmma_gemm", "linear.frag", kLinearDims, "fraglinear/frag_wgmma_gemm.cuh", 90);
  f.summary = "prefill GEMM on Hopper (sm_90a): y^T = W^T x^T with the dequantized weights as wgmma's register A "
              "operand, x in a 128B-swizzled cp.async ring as its shared-memory B, split-K reduced in the same launch";
  f.params = {{"bm", {32, 64, 128, 256}, 64, "rows of x per block: wgmma's N"},
              {"wg", {1, 2, 4}, 1, "warpgroups per block, splitting the 4 fragment pairs of each weight tile"},
              {"stages", {2, 3, 4}, 4, "cp.async stages of x (64 columns of K each)"},
              wgmma_weight_ring_param(),
              wgmma_in_flight_param(),
              {"split", {1, 2, 4}, 1, "blocks along K (64-column chunks; reduced in the same launch)"},
              // Points recorded before these parameters ran no cluster and no stream-K.
              {"cluster", {1, 2, 4}, 1,
               "blocks along K forming one thread block cluster (sm_90), their partial tiles summed in distributed "
               "shared memory: no workspace, no locks (1: none; with split = 1)", {}, false, /*absent_value=*/1},
              {"sk", {0, 114, 132, 228, 264}, 0,
               "stream-K: this many blocks share the (tile, K chunk) units evenly (0: the grid of tiles and splits); "
               "the SM count of an H100 PCIe (114) or SXM / H200 (132), or twice it", {}, false, /*absent_value=*/0}};
  // The weights through the shared ring (pf = 0; wgmma_weight_ring_param says why). The kif = 2 points: the
  // first and the stream-K point with two k-steps in flight, so that every tune measures that choice against its
  // neighbour (the static model has no term for it). The last two: the first and the stream-K point on the
  // register ring, the first of them the point the H200 runs measured.
  f.defaults = {{{"bm", 64}, {"wg", 1}, {"stages", 4}, {"pf", 0}, {"kif", 1}, {"split", 1}, {"cluster", 1}, {"sk", 0}},
                {{"bm", 128}, {"wg", 2}, {"stages", 3}, {"pf", 0}, {"kif", 1}, {"split", 2}, {"cluster", 1}, {"sk", 0}},
                {{"bm", 128}, {"wg", 4}, {"stages", 3}, {"pf", 0}, {"kif", 1}, {"split", 1}, {"cluster", 1}, {"sk", 0}},
                {{"bm", 128}, {"wg", 2}, {"stages", 3}, {"pf", 0}, {"kif", 1}, {"split", 1}, {"cluster", 1}, {"sk", 132}},
                {{"bm", 64}, {"wg", 1}, {"stages", 4}, {"pf", 0}, {"kif", 1}, {"split", 1}, {"cluster", 4}, {"sk", 0}},
                {{"bm", 64}, {"wg", 1}, {"stages", 4}, {"pf", 0}, {"kif", 2}, {"split", 1}, {"cluster", 1}, {"sk", 0}},
                {{"bm", 128}, {"wg", 2}, {"stages", 3}, {"pf", 0}, {"kif", 2}, {"split", 1}, {"cluster", 1}, {"sk", 132}},
                {{"bm", 64}, {"wg", 1}, {"stages", 4}, {"pf", 2}, {"kif", 1}, {"split", 1}, {"cluster", 1}, {"sk", 0}},
                {{"bm", 128}, {"wg", 2}, {"stages", 3}, {"pf", 2}, {"kif", 1}, {"split", 1}, {"cluster", 1}, {"sk", 132}}};
  f.point_constraint = [bits](const Point& p) {
    if (p.at("sk") > 0 && p.at("split") > 1) return std::string("stream-K divides K itself: split must be 1");
    if (std::string e = wgmma_split_check(p, bits, 1); !e.empty()) return e;
    // Each thread holds 4 / wg accumulators of bm / 2 floats: at most half of the registers it may have
    // (255, or 128 at 512 threads a block), the rest being the A sets, the ring, scales and addresses.
    const int64_t acc = (4 / p.at("wg")) * p.at("bm") / 2;
    const int64_t limit = std::min<int64_t>(255, 65536 / (128 * p.at("wg"))) / 2 + 1;
    if (acc > limit)
      return "bm=" + std::to_string(p.at("bm")) + " with wg=" + std::to_string(p.at("wg")) + " needs " +
             std::to_string(acc) + " accumulator registers per thread, over " + std::to_string(limit);
    return std::string();
  };
  f.shape_constraint = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    if (std::string e = limits_check(d, m); !e.empty()) return e;
    return wgmma_split_check(p, d);
  };
  // The DRAM stream is the weights: at pf = 0 the shared ring's chunks in flight, on the register ring its pf
  // tiles (wgmma_weight_bytes_in_flight), a warp's 1 / wg share of each tile's 512 bytes (INT4) or 1,024 (INT8). x,
  // re-read by every column block, comes mostly from L2 and is left out.
  f.bytes_in_flight_per_warp = [bits](const Point& p) { return wgmma_weight_bytes_in_flight(p, bits, 1); };
  // A block's chunks of K (64 columns, 4 k-steps): its share of a grid or cluster split's, or of stream-K's units.
  auto chunks_per_block = [bits](const Point& p, const Shape& shape) {
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    if (p.at("sk") > 0) {
      const int64_t units = streamk_units(d, shape["M"], p.at("bm"));
      return cdiv(units, std::min(p.at("sk"), units));
    }
    return cdiv(cdiv(d.k, frag_wgmma::kBK), std::max(p.at("split"), p.at("cluster")));
  };
  f.latency_chain = [chunks_per_block](const Point& p, const Shape& shape) {
    return wgmma_weight_ring_chain(p, chunks_per_block(p, shape));
  };
  // Its main loop is a chunk a trip: the dequantization of 4 k-steps' A registers is most of its instructions,
  // which the tensor core's time need not cover (at bm = 64 and one warpgroup, about 200 a warp and k-step
  // against 4 wgmmas of 32 cycles each).
  f.main_loop = [chunks_per_block](const Point& p, const Shape& shape, const LaunchPlan& plan) {
    return LoopWork{double(plan.launches.front().grid.count()), double(chunks_per_block(p, shape))};
  };
  // Every buffer once, and the fp32 partials twice (written, then read back) as many as are written: the grid
  // split's whole workspace (split x M x N floats, hundreds of MB at prefill sizes: DRAM); stream-K's partial
  // tiles only, at most two per block, each read by the tile's last block soon after it is written: L2 traffic
  // while they fit the L2 (50 MB on the sm_90 parts); only what exceeds it counts as DRAM bytes.
  f.bytes_moved = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    double bytes = double(m * d.k * 2 + d.weight_words() * 4 + d.scale_halves() * 2 + d.zero_words() * 4 + m * d.n * 2);
    if (p.at("sk") > 0) {
      const int64_t units = streamk_units(d, m, p.at("bm"));
      const double partial_bytes =
          double(streamk_partials(units, std::min(p.at("sk"), units), cdiv(d.k, 64)) * p.at("bm") * 256 * 4);
      constexpr double kL2Bytes = 50e6;  // an H100's or H200's L2
      bytes += 2.0 * std::max(0.0, partial_bytes - kL2Bytes);
    } else if (p.at("split") > 1) {
      bytes += 2.0 * double(p.at("split") * m * d.n * 4);
    }  // a cluster split's partials stay in shared memory
    return bytes;
  };
  f.kernels = [bits](const Point& p) { return std::vector<std::string>{wgmma_kernel(bits, p)}; };
  f.plan = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    const int64_t split = std::max(p.at("split"), p.at("cluster"));
    LaunchPlan plan = frag_linear_plan(d, m, split);
    Launch& l = plan.launches.front();
    l.kernel = wgmma_kernel(bits, p);
    if (p.at("sk") > 0) {
      // No more blocks than units, so that every block's range holds one; two partial tiles each at most.
      const int64_t blocks = std::min(p.at("sk"), streamk_units(d, m, p.at("bm")));
      l.grid.x = uint32_t(blocks);
      for (BufferSpec& b : plan.buffers)
        if (b.name == "ws") b.elements = blocks * 2 * p.at("bm") * 256;
    } else {
      l.grid.x = uint32_t(cdiv(d.n_tiles(), 4));
      l.grid.y = uint32_t(cdiv(m, p.at("bm")));
      l.grid.z = uint32_t(split);
      l.cluster.z = uint32_t(p.at("cluster"));
      if (p.at("cluster") > 1)
        for (BufferSpec& b : plan.buffers)
          if (b.name == "ws") b.elements = 1;
    }
    l.block.x = uint32_t(128 * p.at("wg"));
    l.dynamic_smem = wgmma_smem_bytes(p, bits, 1);
    return plan;
  };
  // The ring in flight holds weights only (above): each row block of bm rows loads them again, stream-K's units
  // as much as the grid's tiles.
  set_tiled_bytes_reread(f, /*x_in_flight=*/false,
                            [](const Point& p, const Shape& s) { return cdiv(s["M"], p.at("bm")); });
  // The grouped GEMMs' measured rows, on this main loop (frag_wgmma_gemm.cuh), say so.
  f.rereads_at_dram_latency = true;
  // The mma.sync GEMM's problem, inputs and reference: the weights rounded to fp16 once, as both kernels do.
  share_problem(f, gemm);
  f.test_shapes.push_back(Shape{kLinearDims, {21, 160, 96, 32}, "odd: K=96 (a short last chunk), the golden ak48's"});
  return f;
}

// ---- the Ampere GEMM with the weights shared through shared memory ----------------------------------------

std::string smem_gemm_kernel(int bits, const Point& p) {
  return name_expr("frag_smem_gemm_kernel",
                   {bits, p.at("mf"), p.at("wm"), p.at("wn"), p.at("stages"), p.at("bk")});
}

int64_t smem_gemm_rows(const Point& p) { return 16 * p.at("mf") * p.at("wm"); }

int64_t smem_gemm_smem_bytes(int bits, const Point& p) {
  return frag_smem::smem_bytes(bits, smem_gemm_rows(p), p.at("wn"), p.at("bk"), p.at("stages"));
}

KernelFamily make_smem_gemm(const SourceKind& kind, const KernelFamily& gemm) {
  const int bits = kind.bits;
  KernelFamily f = frag_family(kind, "_frag_smem_gemm", "linear.frag", kLinearDims, "fraglinear/frag_smem_gemm.cuh", 80);
  f.summary = "prefill GEMM on mma.sync (sm_80+): wm x wn warps, the wm warps of a column sharing its weight tiles "
              "through a cp.async ring that carries x, codes, scales and zeros stages ahead; split-K reduced in the "
              "same launch";
  f.params = {{"mf", {2, 4}, 4, "16-row fragments of M per warp"},
              {"wm", {1, 2, 4}, 2, "warps along M, sharing each weight tile of their column"},
              {"wn", {2, 4, 8}, 4, "warps along N, each one 64-column tile"},
              {"bk", {32, 64}, 64, "columns of K per stage (the group size must be a multiple)"},
              {"stages", {2, 3, 4}, 3, "cp.async stages of x and the weights"},
              {"split", {1, 2, 4, 8}, 1, "blocks along K (reduced in the same launch)"}};
  // A tall block for long prompts (bk = 32 for Q8_0, whose groups are 32 columns), and a half-height one with
  // a split for short prompts and any group of 32 (CI's verification then covers the split too). Each fits the
  // 99 KiB of shared memory a block may have on sm_86 and sm_89.
  const Point tall{{"mf", 4}, {"wm", 2}, {"wn", 4}, {"bk", kind.type == WeightType::Q8_0 ? 32 : 64},
                   {"stages", kind.type == WeightType::Q8_0 ? 4 : 3}, {"split", 1}};
  const Point low{{"mf", 2}, {"wm", 2}, {"wn", 2}, {"bk", 32}, {"stages", 3}, {"split", 2}};
  f.defaults = {tall, low};
  f.defaults_for = [tall, low](const Shape& s) { return s["M"] <= 64 ? std::vector<Point>{low, tall} : std::vector<Point>{tall, low}; };
  f.point_constraint = [bits](const Point& p) {
    // The accumulators (32 per fragment row) need a thread's 255 registers: 256 threads a block at most.
    if (p.at("wm") * p.at("wn") > 8) return std::string("wm x wn over 8 warps: at up to 255 registers a thread, the 64K-register file holds 256 threads");
    const int64_t bytes = smem_gemm_smem_bytes(bits, p);
    if (bytes > frag_wgmma::kMaxSmemBytes)
      return "the ring needs " + std::to_string(bytes) + " bytes of shared memory, over 227 KiB";
    return std::string();
  };
  f.shape_constraint = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    if (std::string e = limits_check(d, m); !e.empty()) return e;
    if (d.group % p.at("bk")) return "the group size must be a multiple of bk=" + std::to_string(p.at("bk"));
    if (p.at("split") > d.k / p.at("bk")) return std::string("split exceeds the bk-column chunks along K");
    return std::string();
  };
  // Every operand streams through the ring, stages - 1 stages ahead of the one the warps read: a warp's share.
  f.bytes_in_flight_per_warp = [bits](const Point& p) {
    return (p.at("stages") - 1) * frag_smem::stage_bytes(bits, smem_gemm_rows(p), p.at("wn"), p.at("bk")) /
           (p.at("wm") * p.at("wn"));
  };
  f.kernels = [bits](const Point& p) { return std::vector<std::string>{smem_gemm_kernel(bits, p)}; };
  f.plan = [bits](const Point& p, const Shape& shape) {
    const int64_t m = shape["M"];
    const FragDims d{shape["N"], shape["K"], shape["G"], bits};
    LaunchPlan plan = frag_linear_plan(d, m, p.at("split"));
    Launch& l = plan.launches.front();
    l.kernel = smem_gemm_kernel(bits, p);
    l.grid.x = uint32_t(cdiv(d.n_tiles(), p.at("wn")));
    l.grid.y = uint32_t(cdiv(m, smem_gemm_rows(p)));
    l.grid.z = uint32_t(p.at("split"));
    l.block.x = uint32_t(32 * p.at("wm") * p.at("wn"));
    l.dynamic_smem = smem_gemm_smem_bytes(bits, p);
    return plan;
  };
  set_tiled_bytes_reread(f);
  set_tiled_main_loop(f);
  // The mma.sync GEMM's problem, inputs and reference: the weights rounded to fp16 once, as both kernels do.
  share_problem(f, gemm);
  f.test_shapes.push_back(Shape{kLinearDims, {130, 320, 512, 64}, "M=130: a second block of 2 rows, N=320 (a part block)"});
  return f;
}

}  // namespace

Param wgmma_in_flight_param() {
  return {"kif", {1, 2}, 1,
          "k-steps of wgmmas in flight per warpgroup: 1 waits for each before issuing the next; 2 queues the next "
          "behind the running one, x's ring then keeping one stage fewer ahead (stages > kif)",
          {}, /*report_ab=*/true, /*absent_value=*/1};  // the loop before it waited for each k-step
}

int64_t wgmma_smem_bytes(const Point& p, int bits, int64_t mats) {
  return frag_wgmma::smem_bytes(p.at("bm"), p.at("stages"), p.at("cluster"), mats,
                                frag_wgmma::weight_ring_bytes(bits, p.at("stages"), p.at("kif"), p.at("pf"), mats));
}

// The register ring (pf > 0) does not keep its tiles in flight. In the sm_90 machine code (NVRTC 13.0, the
// default point; results/wgmma-weight-ring.md) every weight load of the ring, and the group's scale and zero
// loads, write one scoreboard, and the first unpack of a k-step's tile waits on it: a scoreboard wait returns
// only when none of its loads is outstanding, so each k-step waits for the tile issued the k-step before, one
// DRAM round trip a k-step. The H200 timed that point at 125.6 us on 4096 x 4096 at M = 1 and at M = 4 alike,
// and the report's rows at every M to 1,024 within 11% of it: 256 k-steps of about 0.46 us. The shared ring
// (pf = 0) waits with counted cp.async waits, a group of copies at a time. So pf = 0 is the first default, and
// the ring the runs measured is its A/B twin in every report.
Param wgmma_weight_ring_param() {
  return {"pf", {0, 1, 2, 4}, 0,
          "where each warp's weight tiles (16 x 64) come from: 0 a shared-memory ring of whole 64-column chunks, "
          "stages - kif of them in flight (cp.async); 1, 2, 4 that many tiles ahead in registers (one scoreboard: "
          "each k-step waits for the tile loaded the k-step before)",
          {}, /*report_ab=*/true};
}

int64_t wgmma_weight_bytes_in_flight(const Point& p, int bits, int64_t mats) {
  // A warp's share of a tile: 1 / wg of it; a chunk of the shared ring is kBK / 16 tiles (k-steps) a warp. The
  // register ring's pf tiles are what it issues; that it waits for each of them a round trip apart is its
  // latency chain (wgmma_weight_ring_chain), which the model takes where it is the longer.
  const int64_t tiles = p.at("pf") > 0 ? p.at("pf")
                                       : frag_wgmma::weight_chunks_in_flight(p.at("stages"), p.at("kif")) * (frag_wgmma::kBK / 16);
  return mats * tiles * frag_wgmma::weight_tile_bytes(bits) / p.at("wg");
}

LatencyChain wgmma_weight_ring_chain(const Point& p, int64_t chunks) {
  LatencyChain c;
  if (p.at("pf") > 0) c.dram_rounds = double(chunks * (frag_wgmma::kBK / 16));
  return c;
}

std::string wgmma_split_check(const Point& p, int bits, int64_t mats) {
  if (p.at("stages") <= p.at("kif"))
    return "stages=" + std::to_string(p.at("stages")) + " leaves no stage of x ahead of kif=" +
           std::to_string(p.at("kif")) + " k-steps in flight: stages must exceed kif";
  const bool streamk = p.count("sk") && p.at("sk") > 0;
  if (p.at("cluster") > 1 && (p.at("split") > 1 || streamk))
    return std::string("a cluster splits K itself: split must be 1") + (p.count("sk") ? " and sk 0" : "");
  const int64_t bytes = wgmma_smem_bytes(p, bits, mats);
  if (bytes > frag_wgmma::kMaxSmemBytes)
    return "bm=" + std::to_string(p.at("bm")) + ", stages=" + std::to_string(p.at("stages")) +
           (p.at("pf") == 0 ? " with the weights' shared ring" : "") +
           (p.at("cluster") > 1 ? " and a cluster split's partial tile" + std::string(mats > 1 ? "s" : "") : "") +
           " needs " + std::to_string(bytes) + " bytes of shared memory, over 227 KiB";
  return std::string();
}

std::string wgmma_split_check(const Point& p, const FragDims& d) {
  // A group starts at an even k-step only (frag_wgmma_gemm.cuh emits its code in half of its k-steps).
  if (d.group % 32) return "the Hopper GEMMs take groups of a multiple of 32 columns, not " + std::to_string(d.group);
  if (p.at("split") > cdiv(d.k, 64)) return std::string("split exceeds the 64-column chunks along K");
  if (p.at("cluster") > cdiv(d.k, 64)) return std::string("cluster exceeds the 64-column chunks along K");
  return std::string();
}

int64_t linear_smem_bytes(const Point& p) { return p.at("stages") * 16 * p.at("mf") * p.at("bk") * 2; }

const KernelFamily& awq_repack_family() {
  static const KernelFamily f = make_repack(awq_kind());
  return f;
}
const KernelFamily& int8_repack_family() {
  static const KernelFamily f = make_repack(int8gw_kind());
  return f;
}
const KernelFamily& q8_0_repack_family() {
  static const KernelFamily f = make_repack(q8_0_kind());
  return f;
}
const KernelFamily& awq_dequant_family() {
  static const KernelFamily f = make_dequant(awq_kind());
  return f;
}
const KernelFamily& int8_dequant_family() {
  static const KernelFamily f = make_dequant(int8gw_kind());
  return f;
}
const KernelFamily& q8_0_dequant_family() {
  static const KernelFamily f = make_dequant(q8_0_kind());
  return f;
}
const KernelFamily& awq_gemv_family() {
  static const KernelFamily f = make_linear({&awq_kind(), true});
  return f;
}
const KernelFamily& awq_gemm_family() {
  static const KernelFamily f = make_linear({&awq_kind(), false});
  return f;
}
const KernelFamily& int8_gemv_family() {
  static const KernelFamily f = make_linear({&int8gw_kind(), true});
  return f;
}
const KernelFamily& int8_gemm_family() {
  static const KernelFamily f = make_linear({&int8gw_kind(), false});
  return f;
}
const KernelFamily& q8_0_gemv_family() {
  static const KernelFamily f = make_linear({&q8_0_kind(), true});
  return f;
}
const KernelFamily& q8_0_gemm_family() {
  static const KernelFamily f = make_linear({&q8_0_kind(), false});
  return f;
}
std::string stream_gemv_kernel(int bits, int64_t kw, int64_t pf, int64_t tn, bool swiglu, StreamFuse fuse,
                               StreamRoute route, int64_t epl, int64_t ring) {
  std::vector<int64_t> args = {bits, kw, pf, tn, swiglu ? 1 : 0, int64_t(fuse), int64_t(route), epl, ring};
  const std::vector<int64_t> defaults = {0, 0, 0, 1, 0};  // SWIGLU, FUSE, ROUTE, EPL, RING
  for (size_t i = defaults.size(); i > 0 && args.back() == defaults[i - 1]; --i) args.pop_back();
  return name_expr("frag_stream_gemv_kernel", args);
}

const KernelFamily& awq_stream_gemv_family() {
  static const KernelFamily f = make_stream_gemv(awq_kind(), awq_gemv_family());
  return f;
}
const KernelFamily& int8_stream_gemv_family() {
  static const KernelFamily f = make_stream_gemv(int8gw_kind(), int8_gemv_family());
  return f;
}
const KernelFamily& q8_0_stream_gemv_family() {
  static const KernelFamily f = make_stream_gemv(q8_0_kind(), q8_0_gemv_family());
  return f;
}
const KernelFamily& awq_gate_up_family() {
  static const KernelFamily f = make_gate_up_stream(awq_kind());
  return f;
}
const KernelFamily& int8_gate_up_family() {
  static const KernelFamily f = make_gate_up_stream(int8gw_kind());
  return f;
}
const KernelFamily& q8_0_gate_up_family() {
  static const KernelFamily f = make_gate_up_stream(q8_0_kind());
  return f;
}
const KernelFamily& awq_norm_gemv_family() {
  static const KernelFamily f = make_fused_stream(awq_kind(), awq_stream_gemv_family(), Fusion::kNorm);
  return f;
}
const KernelFamily& int8_norm_gemv_family() {
  static const KernelFamily f = make_fused_stream(int8gw_kind(), int8_stream_gemv_family(), Fusion::kNorm);
  return f;
}
const KernelFamily& q8_0_norm_gemv_family() {
  static const KernelFamily f = make_fused_stream(q8_0_kind(), q8_0_stream_gemv_family(), Fusion::kNorm);
  return f;
}
const KernelFamily& awq_residual_gemv_family() {
  static const KernelFamily f = make_fused_stream(awq_kind(), awq_stream_gemv_family(), Fusion::kResidual);
  return f;
}
const KernelFamily& int8_residual_gemv_family() {
  static const KernelFamily f = make_fused_stream(int8gw_kind(), int8_stream_gemv_family(), Fusion::kResidual);
  return f;
}
const KernelFamily& q8_0_residual_gemv_family() {
  static const KernelFamily f = make_fused_stream(q8_0_kind(), q8_0_stream_gemv_family(), Fusion::kResidual);
  return f;
}

const std::vector<const KernelFamily*>& residual_norm_gemv_families() {
  static const std::deque<KernelFamily> all = {
      make_fused_stream(awq_kind(), awq_stream_gemv_family(), Fusion::kResidualNorm),
      make_fused_stream(int8gw_kind(), int8_stream_gemv_family(), Fusion::kResidualNorm),
      make_fused_stream(q8_0_kind(), q8_0_stream_gemv_family(), Fusion::kResidualNorm)};
  static const std::vector<const KernelFamily*> f = family_pointers(all);
  return f;
}
const KernelFamily& awq_norm_gate_up_family() {
  static const KernelFamily f = make_fused_stream(awq_kind(), awq_gate_up_family(), Fusion::kNorm);
  return f;
}
const KernelFamily& int8_norm_gate_up_family() {
  static const KernelFamily f = make_fused_stream(int8gw_kind(), int8_gate_up_family(), Fusion::kNorm);
  return f;
}
const KernelFamily& q8_0_norm_gate_up_family() {
  static const KernelFamily f = make_fused_stream(q8_0_kind(), q8_0_gate_up_family(), Fusion::kNorm);
  return f;
}
const KernelFamily& awq_wgmma_gemm_family() {
  static const KernelFamily f = make_wgmma_gemm(awq_kind(), awq_gemm_family());
  return f;
}
const KernelFamily& int8_wgmma_gemm_family() {
  static const KernelFamily f = make_wgmma_gemm(int8gw_kind(), int8_gemm_family());
  return f;
}
const KernelFamily& q8_0_wgmma_gemm_family() {
  static const KernelFamily f = make_wgmma_gemm(q8_0_kind(), q8_0_gemm_family());
  return f;
}

const KernelFamily& awq_smem_gemm_family() {
  static const KernelFamily f = make_smem_gemm(awq_kind(), awq_gemm_family());
  return f;
}
const KernelFamily& int8_smem_gemm_family() {
  static const KernelFamily f = make_smem_gemm(int8gw_kind(), int8_gemm_family());
  return f;
}
const KernelFamily& q8_0_smem_gemm_family() {
  static const KernelFamily f = make_smem_gemm(q8_0_kind(), q8_0_gemm_family());
  return f;
}

const KernelFamily& repack_family(WeightType t) {
  switch (t) {
    case WeightType::AWQ_INT4: return awq_repack_family();
    case WeightType::INT8_GW_SYM: return int8_repack_family();
    case WeightType::Q8_0: return q8_0_repack_family();
    default: break;
  }
  throw Error(std::string("the frag layout does not hold ") + weight_type_name(t) + " weights", kExitBadInput);
}

}  // namespace qt::kernels::frag
