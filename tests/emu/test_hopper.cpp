// The sm_90a kernels of tests/emu/kernels/hopper.cu on the emulator report nothing and compute D = A * B
// bit for bit as a CPU reference written here: per wgmma (k = 16) the 16 products summed exactly and added to
// the fp32 accumulator with one rounding. Their operand tiles are placed from the TMA / CuTe swizzle-atom
// pictures, so the descriptor decoding of the emulator (emu_ops.h) is checked against an independent layout.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;
using dev::Buffer;
using dev::KernelArgs;

namespace {

const std::vector<std::string> kKernels = {
    "k_wgmma_tile<64, 1, 1, 0, 0>", "k_wgmma_tile<64, 1, 2, 1, 0>",  "k_wgmma_tile<64, 2, 1, 1, 0>",
    "k_wgmma_tile<64, 2, 2, 0, 1>", "k_wgmma_tile<64, 3, 1, 0, 0>",  "k_wgmma_tile<32, 3, 2, 1, 0>",
    "k_wgmma_tile<24, 0, 1, 0, 0>", "k_wgmma_tile<16, 0, 2, 1, 1>",  "k_wgmma_tile<8, 1, 0, 0, 0>",
    "k_wgmma_tile<256, 1, 0, 1, 0>", "k_wgmma_tile<120, 2, 0, 0, 1>",
    "k_pack_images<64, 2, 1, 0, 0>", "k_ws_gemm<64, 2, 2, 1, 0, 0, 1>",
    "k_pack_images<32, 1, 2, 1, 1>", "k_ws_gemm<32, 3, 1, 2, 1, 1, 0>",
    "k_pack_images<48, 2, 0, 0, 0>", "k_ws_gemm<48, 2, 2, 0, 0, 0, 0>", "k_named_barrier_handoff",
    "k_shared_flag_per_block"};

std::shared_ptr<dev::Module> hopper() { return emu::test::module("hopper.cu", kKernels, emu::test::sm90_device()); }

// Random 16-bit inputs (fp16 or bf16 bits) of magnitude below 1 with few significant bits.
std::vector<uint16_t> random_inputs(size_t n, bool bf16, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-64, 64);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) {
    const float f = static_cast<float>(v(rng)) / 64.0f;
    x = bf16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
  }
  return out;
}

float value(uint16_t bits, bool bf16) { return bf16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits); }

// D (rows x n) = A (rows x k, row-major) * Bt^T (Bt: n x k), accumulated as chained wgmmas do: each step of
// 16 adds the exact sum of its products to the fp32 accumulator, rounded once.
std::vector<float> reference(const std::vector<uint16_t>& a, const std::vector<uint16_t>& bt, int rows, int n, int k,
                             bool bf16) {
  std::vector<float> d(static_cast<size_t>(rows) * n, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (int k0 = 0; k0 < k; k0 += 16) {
        double step = 0.0;
        for (int kk = k0; kk < k0 + 16; ++kk) {
          step += static_cast<double>(value(a[r * k + kk], bf16)) * static_cast<double>(value(bt[c * k + kk], bf16));
        }
        acc = static_cast<float>(static_cast<double>(acc) + step);
      }
      d[static_cast<size_t>(r) * n + c] = acc;
    }
  }
  return d;
}

std::string launch(const std::string& kernel, dev::LaunchConfig cfg, const KernelArgs& args, emu::EmuDevice& dev) {
  try {
    dev.launch(hopper()->kernel(kernel), cfg, args);
  } catch (const qt::Error& e) {
    return e.what();
  }
  return {};
}

struct Tile {
  int n, swizzle, a_mode, trans_b;
  bool bf16;
};

std::string tile_kernel(const Tile& t) {
  return "k_wgmma_tile<" + std::to_string(t.n) + ", " + std::to_string(t.swizzle) + ", " + std::to_string(t.a_mode) +
         ", " + std::to_string(t.trans_b) + ", " + std::to_string(t.bf16 ? 1 : 0) + ">";
}

}  // namespace

TEST_CASE("wgmma reads every swizzle mode, K-major and MN-major, A from shared memory or registers, exactly") {
  auto& dev = emu::test::sm90_device();
  const int k = 128;
  // swizzle: 0 none, 1 128B, 2 64B, 3 32B; a_mode: 0 registers, 1 shared K-major, 2 shared M-major.
  const std::vector<Tile> tiles = {{64, 1, 1, 0, false}, {64, 1, 2, 1, false}, {64, 2, 1, 1, false},
                                   {64, 2, 2, 0, true},  {64, 3, 1, 0, false}, {32, 3, 2, 1, false},
                                   {24, 0, 1, 0, false}, {16, 0, 2, 1, true},  {8, 1, 0, 0, false},
                                   {256, 1, 0, 1, false}, {120, 2, 0, 0, true}};
  for (const Tile& t : tiles) {
    const std::string kernel = tile_kernel(t);
    INFO(kernel);
    const auto a = random_inputs(64 * k, t.bf16, 7), bt = random_inputs(static_cast<size_t>(t.n) * k, t.bf16, 11);
    Buffer ba(dev, a.size() * 2), bb(dev, bt.size() * 2), bd(dev, 64 * t.n * 4);
    ba.upload(a);
    bb.upload(bt);
    const uint32_t smem = 1024 + 64 * 64 * 2 + t.n * 64 * 2;
    const auto args = KernelArgs().add(ba.ptr()).add(bb.ptr()).add(bd.ptr()).add(k);
    REQUIRE(launch(kernel, {{1}, {128}, smem}, args, dev).empty());
    CHECK(bd.download<float>(64 * t.n) == reference(a, bt, 64, t.n, k, t.bf16));
  }
}

TEST_CASE("a warp-specialised pipeline of bulk copies, mbarriers and wgmma computes D on each of 10 seeds") {
  struct Pipeline {
    int n, stages, consumers, swizzle, trans_b, a_regs, per_thread;
  };
  // Two consumer warpgroups releasing per thread (128B swizzle); A in registers, one release per warp, an
  // N-major B (64B swizzle, three stages); unswizzled stages with two consumers releasing per warp.
  const std::vector<Pipeline> pipelines = {{64, 2, 2, 1, 0, 0, 1}, {32, 3, 1, 2, 1, 1, 0}, {48, 2, 2, 0, 0, 0, 0}};
  auto& dev = emu::test::sm90_device();
  const int slabs = 5, k = 64 * slabs;
  for (const Pipeline& p : pipelines) {
    const auto args = [](std::initializer_list<int> v) {
      std::string s;
      for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
      return s + ">";
    };
    const std::string pack = "k_pack_images<" + args({p.n, p.consumers, p.swizzle, p.trans_b, p.a_regs});
    const std::string gemm =
        "k_ws_gemm<" + args({p.n, p.stages, p.consumers, p.swizzle, p.trans_b, p.a_regs, p.per_thread});
    INFO(gemm);
    const int rows = 64 * p.consumers;
    const auto a = random_inputs(static_cast<size_t>(rows) * k, false, 3);
    const auto bt = random_inputs(static_cast<size_t>(p.n) * k, false, 5);
    const std::vector<float> want = reference(a, bt, rows, p.n, k, false);
    const uint32_t stage_bytes = rows * 128 + p.n * 128;
    Buffer ba(dev, a.size() * 2), bb(dev, bt.size() * 2), images(dev, static_cast<size_t>(slabs) * stage_bytes),
        bd(dev, want.size() * 4);
    ba.upload(a);
    bb.upload(bt);
    REQUIRE(launch(pack, {{static_cast<uint32_t>(slabs)}, {128}, 0},
                   KernelArgs().add(ba.ptr()).add(bb.ptr()).add(images.ptr()).add(k), dev)
                .empty());
    const uint32_t smem = 1024 + p.stages * stage_bytes + rows * p.n * 4;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      INFO("seed " << seed);
      emu::EmuOptions o = emu::test::test_options(seed, 90);
      o.threads = 2;
      emu::EmuDevice seeded(o);
      dev.memset(bd.ptr(), 0, want.size() * 4);
      REQUIRE(launch(gemm, {{1}, {static_cast<uint32_t>(128 * (p.consumers + 1))}, smem},
                     KernelArgs().add(images.ptr()).add(bd.ptr()).add(slabs), seeded)
                  .empty());
      CHECK(bd.download<float>(want.size()) == want);
    }
  }
}

TEST_CASE("named barriers order a hand-off between the warps of a warpgroup: bar.arrive, then bar.sync") {
  auto& dev = emu::test::sm90_device();
  Buffer out(dev, 128 * 4);
  REQUIRE(launch("k_named_barrier_handoff", {{1}, {128}, 0}, KernelArgs().add(out.ptr()), dev).empty());
  const auto v = out.download<int>(128);
  for (int t = 0; t < 128; ++t) CHECK(v[t] == (t < 64 ? 1001 * t + 64 : 1000 * (t - 64) + t));
}

TEST_CASE("with the block clocks on, a shared slot's reads by an earlier block on the same host thread are no race") {
  // The multi-warp read set of block b stays in the slot's shadow when block b + 1 starts on the same host
  // thread; its tag named one of block b's warp sets, cleared since and reused by block b + 1's own sets. It
  // was reported as a race with block b + 1's write (seen in the wgmma GEMM's split-K flag).
  emu::EmuOptions o = emu::test::test_options(3, 90);
  o.threads = 1;
  emu::EmuDevice dev(o);
  dev::ModuleSource src;
  src.name = "hopper.cu";
  src.source = emu::read_text_file(qt::source_root() + "/tests/emu/kernels/hopper.cu");
  src.kernels = {"k_shared_flag_per_block"};
  auto m = dev.load_module(src);
  constexpr int kBlocks = 6;
  Buffer out(dev, kBlocks * 128 * 4);
  REQUIRE_NOTHROW(dev.launch(m->kernel("k_shared_flag_per_block"), {{kBlocks}, {128}, 0}, KernelArgs().add(out.ptr())));
  const auto v = out.download<int>(kBlocks * 128);
  for (int i = 0; i < kBlocks * 128; ++i) CHECK(v[size_t(i)] == 1000 * (i / 128 + 1) + 1);
}
