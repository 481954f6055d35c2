#include "kernels_src/memcopy/mem_copy_family.h"

#include <algorithm>

#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::memcopy {
namespace {

using Role = BufferSpec::Role;
const std::vector<std::string> kDims = {"N"};

std::string kernel_name(const Point& p) { return name_expr("mem_copy_kernel", {p.at("threads"), p.at("unroll")}); }

KernelFamily make_copy() {
  KernelFamily f;
  f.name = "mem_copy";
  f.op = "copy";
  f.dtypes = "u8->u8";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "memcopy/mem_copy.cuh";
  f.summary = "dst = src over N 16-byte vectors, UNROLL loads in flight per thread (the reports' bandwidth yardstick)";
  f.min_sm = 80;
  f.params = {{"threads", {128, 256, 512, 1024}, 256, "threads per block"},
              {"unroll", {1, 2, 4, 8}, 4, "independent 16-byte loads per thread before its stores"}};
  f.point_constraint = [](const Point&) { return std::string(); };
  f.shape_constraint = [](const Point&, const Shape& s) {
    return s["N"] < 1 ? std::string("N must be positive") : std::string();
  };
  f.kernels = [](const Point& p) { return std::vector<std::string>{kernel_name(p)}; };
  f.plan = [](const Point& p, const Shape& s) {
    const int64_t n = s["N"];
    LaunchPlan plan;
    plan.buffers = {{"src", DType::U8, n * 16, Role::Input}, {"dst", DType::U8, n * 16, Role::Output}};
    Launch l;
    l.kernel = kernel_name(p);
    l.grid.x = uint32_t(copy_blocks(p, n));
    l.block.x = uint32_t(p.at("threads"));
    l.args = {KernelArg::buf("src"), KernelArg::buf("dst"), KernelArg::i64(n)};
    plan.launches.push_back(l);
    return plan;
  };
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    std::vector<uint8_t> src(size_t(s["N"] * 16));
    for (auto& b : src) b = uint8_t(rng.next());
    HostBuffers in;
    in["src"] = std::move(src);
    return in;
  };
  f.reference = [](const Shape&, const HostBuffers& in) {
    Expected e;
    e.buffer = "dst";
    for (uint8_t b : in.at("src")) e.values.push_back(float(b));
    return std::vector<Expected>{e};  // a copy is exact: zero tolerance
  };
  f.model_shapes = [](const ModelConfig&, const ModelWeights*) { return std::vector<Shape>{}; };
  f.probe_shape = Shape{kDims, {1 << 20}, "probe"};
  f.test_shapes = {Shape{kDims, {4096}, "64 KiB"},
                   Shape{kDims, {1001}, "odd: a tail in every unroll and grid stride"},
                   Shape{kDims, {1}, "one vector"}};
  return f;
}

}  // namespace

int64_t copy_blocks(const Point& p, int64_t vectors) {
  // 1,024 blocks cover 132 SMs several waves deep; fewer when there is less to copy.
  return std::clamp<int64_t>(cdiv(vectors, p.at("threads") * p.at("unroll")), 1, 1024);
}

const KernelFamily& copy_family() {
  static const KernelFamily f = make_copy();
  return f;
}

}  // namespace qt::kernels::memcopy
