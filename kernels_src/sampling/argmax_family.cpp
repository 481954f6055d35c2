#include "kernels_src/sampling/argmax_family.h"

#include <climits>
#include <cmath>
#include <limits>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::sampling {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"M", "V"};
const char* kCombine = "argmax_combine_kernel";

std::string kernel_name(const Point& p) { return name_expr("argmax_kernel", {p.at("threads"), p.at("vec")}); }

// Random logits in [-8, 8) with each row planted by m % 4 to cover the rules:
//   0: the maximum 9 twice (the lower index must win) and NaNs before it (NaN never wins);
//   1: every value NaN (no comparable value: -1);
//   2: every value -inf but a NaN at index 0 (the first -inf, index 1, wins);
//   3: the maximum at the last index, NaNs scattered.
std::vector<uint16_t> make_logits(int64_t m_rows, int64_t v, uint64_t seed) {
  Rng rng(seed);
  const uint16_t nan = 0x7e00, neg_inf = 0xfc00;
  std::vector<uint16_t> out(static_cast<size_t>(m_rows * v));
  for (int64_t m = 0; m < m_rows; ++m) {
    uint16_t* row = out.data() + m * v;
    for (int64_t i = 0; i < v; ++i) row[i] = float_to_half_bits(float(16.0 * rng.uniform() - 8.0));
    auto at = [&](uint64_t n) { return int64_t(rng.below(n)); };
    switch (m % 4) {
      case 0: {
        const int64_t a = at(uint64_t(v)), b = at(uint64_t(v));
        row[a] = row[b] = float_to_half_bits(9.0f);
        for (int k = 0; k < 4; ++k) row[at(uint64_t(std::min(a, b) + 1))] = nan;
        row[std::min(a, b)] = float_to_half_bits(9.0f);
        break;
      }
      case 1:
        for (int64_t i = 0; i < v; ++i) row[i] = nan;
        break;
      case 2:
        for (int64_t i = 0; i < v; ++i) row[i] = neg_inf;
        row[0] = nan;
        break;
      default:
        row[v - 1] = float_to_half_bits(10.0f);
        for (int k = 0; k < 8; ++k) row[at(uint64_t(v))] = nan;
        row[v - 1] = float_to_half_bits(10.0f);
        break;
    }
  }
  return out;
}

KernelFamily make_argmax() {
  KernelFamily f;
  f.name = "argmax";
  f.op = "argmax";
  f.dtypes = "f16->i32";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "sampling/argmax.cuh";
  f.summary = "greedy argmax per row of fp16 logits, ties to the lowest index, NaN never wins; split rows + combine";
  f.min_sm = 80;
  f.params = {{"threads", {64, 128, 256, 512, 1024}, 256, "threads per block"},
              {"vec", {1, 2, 4, 8}, 8, "logits per thread and access (2 to 16 bytes)"},
              {"splits", {1, 4, 16, 32}, 16, "blocks per row (a combine launch when > 1)"}};
  f.defaults = {{{"threads", 256}, {"vec", 8}, {"splits", 16}}, {{"threads", 128}, {"vec", 1}, {"splits", 1}}};
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [](const Point& p, const Shape& s) {
    if (s["M"] < 1 || s["V"] < 1) return std::string("M and V must be positive");
    if (s["M"] > 65535) return std::string("M must stay at most 65535 (grid y)");
    if (s["V"] > INT32_MAX / 2) return std::string("V must stay below 2^30 (32-bit kernel indexing)");
    if (s["V"] % p.at("vec")) return "V must be a multiple of vec=" + std::to_string(p.at("vec")) + " (aligned rows)";
    return std::string();
  };
  f.kernels = [](const Point& p) {
    std::vector<std::string> k = {kernel_name(p)};
    if (p.at("splits") > 1) k.push_back(kCombine);
    return k;
  };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t m = s["M"], v = s["V"], splits = p.at("splits");
    const int64_t partials = splits > 1 ? m * splits : 1;
    LaunchPlan plan;
    plan.buffers = {{"logits", DType::F16, m * v, Role::Input},
                    {"token", DType::I32, m, Role::Output},
                    {"ws_val", DType::F32, partials, Role::Workspace},
                    {"ws_idx", DType::I32, partials, Role::Workspace}};
    Launch l;
    l.kernel = kernel_name(p);
    l.grid.x = static_cast<uint32_t>(splits);
    l.grid.y = static_cast<uint32_t>(m);
    l.block.x = static_cast<uint32_t>(p.at("threads"));
    l.args = {KernelArg::buf("logits"), KernelArg::buf("token"), KernelArg::buf("ws_val"), KernelArg::buf("ws_idx"),
              KernelArg::i32(v)};
    plan.launches.push_back(l);
    if (splits > 1) {
      Launch c;
      c.kernel = kCombine;
      c.grid.x = static_cast<uint32_t>(m);
      c.block.x = 32;
      c.args = {KernelArg::buf("ws_val"), KernelArg::buf("ws_idx"), KernelArg::buf("token"), KernelArg::i32(splits)};
      plan.launches.push_back(c);
    }
    return plan;
  };
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    return HostBuffers{{"logits", bytes_of(make_logits(s["M"], s["V"], seed))}};
  };
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const int64_t m = s["M"], v = s["V"];
    const auto logits = from_bytes<uint16_t>(in.at("logits"));
    Expected e;  // indices: exact
    e.buffer = "token";
    for (int64_t row = 0; row < m; ++row) {
      int64_t best = -1;
      float best_v = 0;
      for (int64_t i = 0; i < v; ++i) {
        const float x = half_bits_to_float(logits[size_t(row * v + i)]);
        if (std::isnan(x)) continue;
        if (best < 0 || x > best_v) best = i, best_v = x;
      }
      e.values.push_back(float(best));
    }
    return std::vector<Expected>{e};
  };
  f.model_shapes = [](const ModelConfig& c, const ModelWeights*) {
    Shape s{kDims, {1, c.vocab_size}, "greedy decode over lm_head logits"};
    s.max_rows = kLogitRowsPerPass;
    return std::vector<Shape>{s};
  };
  f.probe_shape = Shape{kDims, {1, 151936}, "probe"};
  f.test_shapes = {Shape{kDims, {1, 151936}, "Qwen3 vocabulary, decode"},
                   Shape{kDims, {4, 1001}, "odd V: every planted row kind, vec 1 only"},
                   Shape{kDims, {5, 640}, "M=5, fewer logits than some splits' threads"}};
  return f;
}

}  // namespace

const KernelFamily& argmax_family() {
  static const KernelFamily f = make_argmax();
  return f;
}

}  // namespace qt::kernels::sampling
