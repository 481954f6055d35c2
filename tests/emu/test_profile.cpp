// The emulator's memory profile on requests whose cost is known by construction: a warp reading a column of
// a [32][33] float tile hits 32 different banks, of a [32][32] tile one bank 32 times; a warp loading
// consecutive float4s touches 4 sectors per 8 lanes, all of them needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "device/emu/profile_counters.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;
using dev::Buffer;
using dev::KernelArgs;

namespace {

const std::vector<std::string> kKernels = {"k_column_read<33>", "k_column_read<32>", "k_float4_load"};

emu::EmuDevice& profiling_device() {
  static emu::EmuDevice dev = [] {
    emu::EmuOptions o = emu::test::test_options();
    o.profile = true;
    return emu::EmuDevice(o);
  }();
  return dev;
}

emu::KernelProfile profile_of(const std::string& kernel, const dev::LaunchConfig& cfg, const KernelArgs& args) {
  auto& dev = profiling_device();
  dev.clear_profiles();
  dev.launch(emu::test::module("fidelity.cu", kKernels, dev)->kernel(kernel), cfg, args);
  const auto all = dev.profiles();
  REQUIRE(all.size() == 1);
  return all.front();
}

// The one load site of the column read (the tile is written row by row before it).
emu::MemCounters column_load(const emu::KernelProfile& p) {
  for (const auto& s : p.sites)
    if (s.kind == "shared load") return s.c;
  FAIL("no shared load site in the profile");
  return {};
}

}  // namespace

TEST_CASE("a stride-33 shared column read has no bank conflict, a stride-32 one is 32-way") {
  Buffer out(profiling_device(), 32 * 4);
  const auto p33 = profile_of("k_column_read<33>", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  const auto c33 = column_load(p33);
  CHECK(c33.requests == 1);
  CHECK(c33.wavefronts == 1);
  CHECK(c33.max_ways == 1);
  const auto p32 = profile_of("k_column_read<32>", {{1}, {32}, 0}, KernelArgs().add(out.ptr()));
  const auto c32 = column_load(p32);
  CHECK(c32.requests == 1);
  CHECK(c32.max_ways == 32);
  CHECK(c32.wavefronts - c32.ideal_wavefronts == 31);
  // The row-wise fill is conflict-free in both: 32 consecutive words per request.
  CHECK(p32.shared_stores.wavefronts == p32.shared_stores.ideal_wavefronts);
}

TEST_CASE("a fully coalesced float4 load takes 4 sectors per 8 lanes, the ideal") {
  auto& dev = profiling_device();
  Buffer x(dev, 64 * 16), out(dev, 64 * 4);
  dev.memset(x.ptr(), 0, 64 * 16);
  const auto p = profile_of("k_float4_load", {{2}, {32}, 0}, KernelArgs().add(x.ptr()).add(out.ptr()));
  CHECK(p.global_loads.requests == 2);
  CHECK(p.global_loads.lane_accesses == 64);
  CHECK(p.global_loads.sectors == 2 * 16);
  CHECK(p.global_loads.sectors * 8 == 4 * p.global_loads.lane_accesses);
  CHECK(p.global_loads.ideal_sectors == p.global_loads.sectors);
  CHECK(p.global_loads.bytes == 64 * 16);
  CHECK(p.global_stores.bytes == 64 * 4);
  CHECK(p.global_stores.sectors == 2 * 4);
}

TEST_CASE("request arithmetic: broadcast is free, a strided global access wastes sectors") {
  std::vector<emu::LaneAccess> same_word, strided;
  for (uint32_t l = 0; l < 32; ++l) {
    same_word.push_back({l, 64, 4});
    strided.push_back({l, uint64_t{l} * 64, 4});
  }
  uint64_t wf = 0, ideal = 0, sectors = 0, ideal_sectors = 0;
  uint32_t ways = 0;
  emu::shared_wavefronts(same_word, wf, ideal, ways);
  CHECK(wf == 1);
  CHECK(ways == 1);
  emu::global_sectors(strided, sectors, ideal_sectors);
  CHECK(sectors == 32);
  CHECK(ideal_sectors == 4);
}
