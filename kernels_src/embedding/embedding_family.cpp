#include "kernels_src/embedding/embedding_family.h"

#include <array>
#include <climits>

#include "common/error.h"
#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "models/core/weights.h"
#include "family_source_hash.h"

namespace qt::kernels::embedding {
namespace {

using Role = BufferSpec::Role;
constexpr WeightType kTypes[] = {WeightType::F32,         WeightType::F16,          WeightType::BF16,
                                 WeightType::Q8_0,        WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM,
                                 WeightType::AWQ_INT4};

std::vector<std::string> dims_of(const WeightTraits& w) {
  if (w.quantized) return {"M", "N", "V", "G"};
  return {"M", "N", "V"};
}

// The element type of one of the table's arrays, as the kernel reads it.
DType array_dtype(const WeightTraits& w, WeightArray a) {
  switch (a) {
    case WeightArray::Values:
      return w.type == WeightType::F32 ? DType::F32 : w.type == WeightType::BF16 ? DType::BF16 : DType::F16;
    case WeightArray::Q: return w.type == WeightType::Q8_0 ? DType::I8 : DType::U8;
    case WeightArray::Scales: return w.scale == ScaleType::F32 ? DType::F32 : DType::F16;
    case WeightArray::Zeros: return DType::F16;
    case WeightArray::QWeight:
    case WeightArray::QZeros: return DType::I32;
  }
  throw Error("embedding: unknown weight array", kExitFailure);
}

struct Dims {
  int64_t m, n, v, g;
};
Dims dims(const WeightTraits& w, const Shape& s) { return {s["M"], s["N"], s["V"], w.quantized ? s["G"] : 0}; }

// The weight arrays of the [V][N] table (rows = V, cols = N), in file order.
std::vector<BufferSpec> table_buffers(const WeightTraits& w, const Dims& d) {
  std::vector<BufferSpec> out;
  for (const ArraySpec& a : w.array_specs()) {
    const DType t = array_dtype(w, a.array);
    const uint64_t bytes = a.bytes(uint64_t(d.v * d.n), w.quantized ? uint64_t(d.v * d.n / d.g) : 0);
    out.push_back({weight_array_name(a.array), t, int64_t(bytes) / dtype_size(t), Role::Input});
  }
  return out;
}

std::string kernel_name(const WeightTraits& w, const Point& p) {
  return name_expr(std::string("embedding_") + w.short_name + "_kernel", {p.at("threads"), p.at("vec")});
}

// Tokens: uniform in [0, V), with the last row of the table first and, from M = 3 on, one token below and
// one past the table (they must give rows of zeros without reading out of bounds).
std::vector<int32_t> make_tokens(const Dims& d, Rng& rng) {
  std::vector<int32_t> tok(static_cast<size_t>(d.m));
  for (auto& t : tok) t = int32_t(rng.below(uint64_t(d.v)));
  tok[0] = int32_t(d.v - 1);
  if (d.m >= 3) tok[1] = -1, tok[size_t(d.m - 1)] = int32_t(d.v);
  return tok;
}

// Random contents of one array: values in [-2, 2), quantized codes over their whole range, scales in
// [-0.02, 0.02), zeros in [-0.1, 0.1).
std::vector<uint8_t> random_array(const BufferSpec& b, WeightArray a, Rng& rng) {
  auto uniform = [&](double lo, double hi) { return float(lo + (hi - lo) * rng.uniform()); };
  std::vector<uint8_t> out(static_cast<size_t>(b.bytes()));
  auto put16 = [&](size_t i, uint16_t v) { std::memcpy(out.data() + 2 * i, &v, 2); };
  switch (a) {
    case WeightArray::Values:
      for (int64_t i = 0; i < b.elements; ++i) {
        const float v = uniform(-2, 2);
        if (b.dtype == DType::F32) std::memcpy(out.data() + 4 * i, &v, 4);
        else put16(size_t(i), b.dtype == DType::BF16 ? float_to_bf16_bits(v) : float_to_half_bits(v));
      }
      break;
    case WeightArray::Q:
    case WeightArray::QWeight:
    case WeightArray::QZeros:
      rng.fill_bytes(out.data(), out.size());
      break;
    case WeightArray::Scales:
      for (int64_t i = 0; i < b.elements; ++i) {
        const float v = uniform(-0.02, 0.02);
        if (b.dtype == DType::F32) std::memcpy(out.data() + 4 * i, &v, 4);
        else put16(size_t(i), float_to_half_bits(v));
      }
      break;
    case WeightArray::Zeros:
      for (int64_t i = 0; i < b.elements; ++i) put16(size_t(i), float_to_half_bits(uniform(-0.1, 0.1)));
      break;
  }
  return out;
}

// The group a model's table uses: its file's, else the config's when it divides N, else the largest power
// of two up to 128 that does.
int64_t table_group(const ModelConfig& c, const ModelWeights* w) {
  if (w && w->embedding.group_size > 0) return w->embedding.group_size;
  if (c.group_size > 0 && c.dim % c.group_size == 0) return c.group_size;
  int64_t g = 128;
  while (g > 1 && c.dim % g) g /= 2;
  return g;
}

KernelFamily make_family(WeightType type) {
  const WeightTraits& tr = weight_traits(type);
  KernelFamily f;
  f.name = std::string("embedding.") + tr.short_name;
  f.op = "embedding";
  f.weight_types = {type};
  f.dtypes = std::string(tr.short_name) + "->f16";
  f.dims = dims_of(tr);
  f.source_hash = kFamilySourceHash;
  f.source = "embedding/embedding.cuh";
  f.summary = std::string("embedding lookup: ") + tr.name + " table [V][N] -> fp16 rows; tokens outside [0, V) give zeros";
  f.min_sm = 80;
  f.params = {{"threads", {64, 128, 256, 512}, 128, "threads per block"},
              {"vec", {1, 2, 4, 8, 16}, 8,
               tr.in_major ? "elements per thread (independent loads in flight)" : "elements per thread and vector access"}};
  f.defaults = {{{"threads", 128}, {"vec", 8}}, {{"threads", 256}, {"vec", 1}}};
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [type](const Point& p, const Shape& s) {
    const WeightTraits& w = weight_traits(type);
    const Dims d = dims(w, s);
    if (d.m < 1 || d.n < 1 || d.v < 1) return std::string("M, N and V must be positive");
    if (d.m > 65535) return std::string("M must stay at most 65535 (grid y)");
    if (d.n > INT32_MAX / d.v) return std::string("V*N must stay below 2^31 (32-bit kernel indexing)");
    if (d.n % p.at("vec")) return "N must be a multiple of vec=" + std::to_string(p.at("vec")) + " (aligned rows)";
    if (w.quantized) {
      if (d.g < 1 || d.n % d.g) return std::string("the group size G must divide N");
      if (type == WeightType::Q8_0 && d.g % p.at("vec")) return "G must be a multiple of vec=" + std::to_string(p.at("vec"));
      if (d.v % w.rows_per_word) return "V must be a multiple of " + std::to_string(w.rows_per_word) + " (packed words)";
    }
    return std::string();
  };
  f.kernels = [type](const Point& p) { return std::vector<std::string>{kernel_name(weight_traits(type), p)}; };
  // The M rows looked up, not the table: counting its buffers put the model at 3,500-14,000x the H200's 4 us.
  f.bytes_moved = [type](const Point&, const Shape& s) {
    const WeightTraits& w = weight_traits(type);
    const Dims d = dims(w, s);
    double table = 0;
    for (const BufferSpec& b : table_buffers(w, d)) table += double(b.bytes());
    return 4.0 * double(d.m) + table * double(d.m) / double(d.v) + 2.0 * double(d.m * d.n);
  };
  f.plan = [type](const Point& p, const Shape& s) {
    const WeightTraits& w = weight_traits(type);
    const Dims d = dims(w, s);
    LaunchPlan plan;
    plan.buffers.push_back({"tokens", DType::I32, d.m, Role::Input});
    for (const BufferSpec& b : table_buffers(w, d)) plan.buffers.push_back(b);
    plan.buffers.push_back({"y", DType::F16, d.m * d.n, Role::Output});
    Launch l;
    l.kernel = kernel_name(w, p);
    l.grid.x = static_cast<uint32_t>(cdiv(d.n, p.at("threads") * p.at("vec")));
    l.grid.y = static_cast<uint32_t>(d.m);
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    for (const BufferSpec& b : plan.buffers) l.args.push_back(KernelArg::buf(b.name));
    l.args.push_back(KernelArg::i32(d.n));
    l.args.push_back(KernelArg::i32(d.v));
    if (w.quantized) l.args.push_back(KernelArg::i32(d.g));
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [type](const Shape& s, uint64_t seed) {
    const WeightTraits& w = weight_traits(type);
    const Dims d = dims(w, s);
    Rng rng(seed);
    HostBuffers in;
    in["tokens"] = bytes_of(make_tokens(d, rng));
    const auto buffers = table_buffers(w, d);
    for (size_t i = 0; i < buffers.size(); ++i) in[buffers[i].name] = random_array(buffers[i], w.arrays[i].array, rng);
    return in;
  };
  f.reference = [type](const Shape& s, const HostBuffers& in) {
    const WeightTraits& w = weight_traits(type);
    const Dims d = dims(w, s);
    QTensor t;
    t.type = w.type;
    t.rows = d.v;
    t.cols = d.n;
    t.group_size = int32_t(d.g);
    for (const ArraySpec& a : w.array_specs()) t.set_array(a.array, in.at(weight_array_name(a.array)).data());
    const auto tokens = from_bytes<int32_t>(in.at("tokens"));
    Expected e;  // bit-exact: every type's dequantized value is one fp32 rounding at most, then one fp16 rounding
    e.buffer = "y";
    e.values.assign(size_t(d.m * d.n), 0.0f);
    std::vector<float> row(static_cast<size_t>(d.n));
    for (int64_t m = 0; m < d.m; ++m) {
      if (tokens[size_t(m)] < 0 || tokens[size_t(m)] >= d.v) continue;
      dequantize_row(t, tokens[size_t(m)], row.data());
      for (int64_t c = 0; c < d.n; ++c) e.values[size_t(m * d.n + c)] = round_to_half(row[size_t(c)]);
    }
    return std::vector<Expected>{e};
  };
  f.model_shapes = [type](const ModelConfig& c, const ModelWeights* weights) {
    const WeightTraits& w = weight_traits(type);
    std::vector<Shape> out;
    if (weights && weights->embedding.type != type) return out;
    for (int64_t m : {int64_t(1), int64_t(512)}) {
      std::vector<int64_t> v = {m, c.dim, c.vocab_size};
      if (w.quantized) v.push_back(table_group(c, weights));
      out.push_back(Shape{dims_of(w), v, m == 1 ? "decode token" : "prefill tokens"});
    }
    return out;
  };
  auto shape = [&](std::vector<int64_t> v, int64_t g, std::string label) {
    if (tr.quantized) v.push_back(g);
    return Shape{dims_of(tr), v, std::move(label)};
  };
  f.probe_shape = shape({8, 4096, 151936}, 128, "probe");
  f.test_shapes = {shape({5, 1024, 64}, 64, "Qwen3-0.6B dim, vocabulary cut to 64, two tokens out of range"),
                   shape({4, 40, 56}, 8, "odd: N=40, groups of 8"),
                   shape({3, 96, 16}, 32, "N=96 spans part of a block, tiny vocabulary")};
  return f;
}

}  // namespace

const std::vector<const KernelFamily*>& families() {
  static const std::vector<const KernelFamily*> all = [] {
    static std::array<KernelFamily, std::size(kTypes)> made;
    std::vector<const KernelFamily*> out;
    for (size_t i = 0; i < std::size(kTypes); ++i) {
      made[i] = make_family(kTypes[i]);
      out.push_back(&made[i]);
    }
    return out;
  }();
  return all;
}

const KernelFamily& family(WeightType t) {
  for (size_t i = 0; i < std::size(kTypes); ++i)
    if (kTypes[i] == t) return *families()[i];
  throw Error("embedding: no family for weight type " + std::string(weight_type_name(t)), kExitFailure);
}

}  // namespace qt::kernels::embedding
