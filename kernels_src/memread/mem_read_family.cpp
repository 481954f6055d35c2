#include "kernels_src/memread/mem_read_family.h"

#include "common/rng.h"
#include "kernels_src/registry/family_util.h"
#include "family_source_hash.h"

namespace qt::kernels::memread {
namespace {

using Role = BufferSpec::Role;
// N: bytes read (whole 512-byte tiles); B: blocks, so a point's bytes in flight per SM follow from B / SMs.
const std::vector<std::string> kDims = {"N", "B"};
constexpr int64_t kTileBytes = 512;  // a warp's 16-byte load, the unit of DEPTH

// The cp.async and bulk rings are per warp in static shared memory: at most sm_80's 48 KB of it.
constexpr int64_t kStaticSmem = 48 * 1024;

std::string kernel_name(bool bulk, const Point& p) {
  if (bulk) return name_expr("mem_read_kernel", {2, p.at("warps"), p.at("depth"), p.at("tiles")});
  return name_expr("mem_read_kernel", {p.at("load"), p.at("warps"), p.at("depth")});
}
int64_t stage_tiles(const Point& p) { return p.count("tiles") ? p.at("tiles") : 1; }

// The emulator, which verifies every point in CI, follows at most 32 mbarriers a block; each bulk stage has two.
constexpr int64_t kMbarriers = 32;

KernelFamily make_read(bool bulk) {
  KernelFamily f;
  f.name = bulk ? "mem_read_bulk" : "mem_read";
  f.op = "read";
  f.dtypes = "u8->i32";
  f.dims = kDims;
  f.source_hash = kFamilySourceHash;
  f.source = "memread/mem_read.cuh";
  f.min_sm = bulk ? 90 : 80;
  f.summary = bulk ? "DRAM read stream by TMA bulk copies, depth 512-byte stages in flight a warp (the bandwidth ladder)"
                   : "DRAM read stream by 16-byte register loads (load=0) or cp.async (load=1), depth 512-byte tiles in "
                     "flight a warp (the bandwidth ladder)";
  f.params = {{"warps", {1, 2, 4, 8, 16}, 4, "warps per block, each a contiguous part of the block's share"},
              {"depth", {1, 2, 4, 8, 16, 32}, 4, bulk ? "bulk-copy stages each warp keeps in flight" : "512-byte tiles each warp keeps in flight"}};
  if (!bulk) f.params.insert(f.params.begin(), Param{"load", {0, 1}, 0, "0: register loads (the GEMVs'), 1: cp.async (the GEMMs')"});
  if (bulk) f.params.push_back(Param{"tiles", {1, 4, 16}, 4, "512-byte tiles a bulk copy (a stage) moves"});
  // Both kinds of load verified in CI (a family's defaults are).
  if (bulk) f.defaults = {{{"warps", 4}, {"depth", 4}, {"tiles", 4}}};
  else f.defaults = {{{"load", 0}, {"warps", 4}, {"depth", 4}}, {{"load", 1}, {"warps", 4}, {"depth", 4}}};
  f.point_constraint = [bulk](const Point& p) {
    const int64_t load = bulk ? 2 : p.at("load");
    const int64_t smem = p.at("warps") * p.at("depth") * stage_tiles(p) * kTileBytes;
    if (load > 0 && smem > kStaticSmem)
      return "a ring of " + std::to_string(smem) + " bytes (warps x depth x tiles x 512), over 48 KB of static shared memory";
    if (bulk && 2 * p.at("warps") * p.at("depth") > kMbarriers)
      return std::string("2 x warps x depth mbarriers, over the 32 a block the emulator that verifies it follows");
    if (load == 0 && p.at("depth") > 16) return std::string("depth > 16: over 64 registers a lane of ring");
    return std::string();
  };
  f.shape_constraint = [](const Point&, const Shape& s) {
    if (s["N"] < kTileBytes || s["N"] % kTileBytes) return std::string("N must be whole 512-byte tiles");
    if (s["B"] < 1 || s["B"] > (1 << 20)) return std::string("B (blocks) must be 1..1048576");
    return std::string();
  };
  f.kernels = [bulk](const Point& p) { return std::vector<std::string>{kernel_name(bulk, p)}; };
  f.plan = [bulk](const Point& p, const Shape& s) {
    LaunchPlan plan;
    plan.buffers = {{"src", DType::U8, s["N"], Role::Input}, {"out", DType::I32, s["B"], Role::Output}};
    Launch l;
    l.kernel = kernel_name(bulk, p);
    l.grid.x = uint32_t(s["B"]);
    l.block.x = uint32_t(32 * p.at("warps"));
    l.args = {KernelArg::buf("src"), KernelArg::i64(s["N"] / kTileBytes), KernelArg::buf("out")};
    plan.launches.push_back(l);
    return plan;
  };
  f.bytes_in_flight_per_warp = [](const Point& p) { return p.at("depth") * stage_tiles(p) * kTileBytes; };
  f.make_inputs = [](const Shape& s, uint64_t seed) {
    Rng rng(seed);
    std::vector<uint8_t> src(static_cast<size_t>(s["N"]));
    for (size_t i = 0; i + 8 <= src.size(); i += 8) {
      const uint64_t v = rng.next();
      for (int b = 0; b < 8; ++b) src[i + size_t(b)] = uint8_t(v >> (8 * b));
    }
    HostBuffers in;
    in["src"] = std::move(src);
    return in;
  };
  // Each block's word: the XOR of every 32-bit word of its share of the tiles, its halves XORed into 16 bits (exact
  // as the float the comparison reads). The share is the kernel's split by blocks alone, so it holds at every point.
  f.reference = [](const Shape& s, const HostBuffers& in) {
    const std::vector<uint8_t>& src = in.at("src");
    const int64_t tiles = s["N"] / kTileBytes, blocks = s["B"], per = cdiv(tiles, blocks);
    Expected e;
    e.buffer = "out";
    for (int64_t b = 0; b < blocks; ++b) {
      uint32_t x = 0;
      const int64_t first = std::min(tiles, b * per), last = std::min(tiles, first + per);
      for (int64_t i = first * kTileBytes; i < last * kTileBytes; i += 4)
        x ^= uint32_t(src[size_t(i)]) | uint32_t(src[size_t(i + 1)]) << 8 | uint32_t(src[size_t(i + 2)]) << 16 |
             uint32_t(src[size_t(i + 3)]) << 24;
      e.values.push_back(float((x ^ (x >> 16)) & 0xffffu));
    }
    return std::vector<Expected>{e};  // exact
  };
  f.model_shapes = [](const ModelConfig&, const ModelWeights*) { return std::vector<Shape>{}; };
  f.probe_shape = Shape{kDims, {64 << 20, 264}, "probe: 64 MiB over two blocks an SM of an H100/H200"};
  f.test_shapes = {Shape{kDims, {512 * 96, 4}, "96 tiles over 4 blocks"},
                   Shape{kDims, {512 * 37, 5}, "odd: 37 tiles over 5 blocks, short and empty warps"},
                   Shape{kDims, {512, 3}, "one tile, blocks with nothing to read"},
                   Shape{kDims, {512 * 200, 1}, "50 tiles a warp: every ring refilled many times over, both parities"}};
  return f;
}

}  // namespace

const KernelFamily& read_family() {
  static const KernelFamily f = make_read(false);
  return f;
}

const KernelFamily& bulk_read_family() {
  static const KernelFamily f = make_read(true);
  return f;
}

}  // namespace qt::kernels::memread
