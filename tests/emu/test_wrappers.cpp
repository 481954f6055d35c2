// Every wrapper of kernels_src/common/qt_cuda.h run inside kernels on the emulator, checked against the PTX
// ISA tables and definitions written out here independently (fragment layouts per lane and register).
#include <catch2/catch.hpp>

#include <random>

#include "kernels_src/common/emu_ops.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/ref_round.h"

using namespace qt;
using dev::Buffer;
using dev::KernelArgs;

namespace {

const std::vector<std::string> kKernels = {
    "k_lop3", "k_prmt", "k_dequant", "k_half_ops", "k_mma<false>", "k_mma<true>", "k_mma_s8", "k_ldmatrix",
    "k_shfl", "k_vote", "k_cp_async", "k_ldg_stream", "k_atomics", "k_barrier_ops", "k_order"};

std::shared_ptr<dev::Module> wrappers() { return emu::test::module("wrappers.cu", kKernels); }

template <class T>
Buffer upload(const std::vector<T>& v) {
  Buffer b(emu::test::device(), v.size() * sizeof(T));
  b.upload(v);
  return b;
}

}  // namespace

TEST_CASE("lop3 wrapper computes every LUT as the ISA defines") {
  auto& dev = emu::test::device();
  const int n = 64;
  std::mt19937 rng(1);
  std::vector<uint32_t> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = rng();
    b[i] = rng();
    c[i] = rng();
  }
  a[0] = 0xF0;  // F(0xF0, 0xCC, 0xAA) == LUT
  b[0] = 0xCC;
  c[0] = 0xAA;
  Buffer ba = upload(a), bb = upload(b), bc = upload(c), out(dev, 256 * n * 4);
  dev.launch(wrappers()->kernel("k_lop3"), {{256}, {32}, 0},
             KernelArgs().add(ba.ptr()).add(bb.ptr()).add(bc.ptr()).add(out.ptr()).add(n));
  const auto r = out.download<uint32_t>(256 * n);
  for (uint32_t lut = 0; lut < 256; ++lut) {
    REQUIRE((r[lut * n] & 0xFF) == lut);
    for (int i = 0; i < n; ++i) {
      uint32_t expect = 0;
      for (int bit = 0; bit < 32; ++bit) {
        const uint32_t idx = (((a[i] >> bit) & 1u) << 2) | (((b[i] >> bit) & 1u) << 1) | ((c[i] >> bit) & 1u);
        expect |= ((lut >> idx) & 1u) << bit;
      }
      REQUIRE(r[lut * n + i] == expect);
    }
  }
}

TEST_CASE("prmt wrapper permutes bytes for every selector nibble") {
  auto& dev = emu::test::device();
  const int n = 4096;
  std::mt19937 rng(2);
  std::vector<uint32_t> a(n), b(n), s(n);
  for (int i = 0; i < n; ++i) {
    a[i] = rng();
    b[i] = rng();
    s[i] = (i < 16) ? static_cast<uint32_t>(i * 0x1111) : (rng() & 0xFFFF);
  }
  Buffer ba = upload(a), bb = upload(b), bs = upload(s), out(dev, n * 4);
  dev.launch(wrappers()->kernel("k_prmt"), {{n / 128}, {128}, 0},
             KernelArgs().add(ba.ptr()).add(bb.ptr()).add(bs.ptr()).add(out.ptr()).add(n));
  const auto r = out.download<uint32_t>(n);
  for (int i = 0; i < n; ++i) {
    const uint8_t bytes[8] = {uint8_t(a[i]), uint8_t(a[i] >> 8), uint8_t(a[i] >> 16), uint8_t(a[i] >> 24),
                              uint8_t(b[i]), uint8_t(b[i] >> 8), uint8_t(b[i] >> 16), uint8_t(b[i] >> 24)};
    uint32_t expect = 0;
    for (int k = 0; k < 4; ++k) {
      const uint32_t nib = (s[i] >> (4 * k)) & 0xF;
      const uint8_t src = bytes[nib & 7];
      const uint8_t v = (nib & 8) ? ((src & 0x80) ? 0xFF : 0x00) : src;
      expect |= uint32_t{v} << (8 * k);
    }
    REQUIRE(r[i] == expect);
  }
}

TEST_CASE("INT4 magic-number dequant yields every nibble of every input in AWQ column order") {
  auto& dev = emu::test::device();
  // Every 16-bit pattern in the low half and (scrambled) in the high half: all 256 byte values at all four byte
  // positions and every nibble value at all eight nibble positions.
  const int n = 65536;
  std::vector<uint32_t> q(n);
  for (uint32_t v = 0; v < 65536; ++v) q[v] = v | (((v * 40503u) & 0xFFFFu) << 16);
  Buffer bq = upload(q), out(dev, n * 16);
  dev.launch(wrappers()->kernel("k_dequant"), {{n / 256}, {256}, 0}, KernelArgs().add(bq.ptr()).add(out.ptr()).add(n));
  const auto r = out.download<uint32_t>(4 * n);
  const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // AWQ: logical column e sits in nibble order[e]
  for (int i = 0; i < n; ++i) {
    for (int e = 0; e < 8; ++e) {
      const uint16_t got = static_cast<uint16_t>(r[4 * i + e / 2] >> (16 * (e % 2)));
      const uint32_t nibble = (q[i] >> (4 * order[e])) & 0xF;
      REQUIRE(got == qt::float_to_half_bits(static_cast<float>(nibble)));
    }
  }
}

TEST_CASE("packed half wrappers and __half operators round per operation") {
  auto& dev = emu::test::device();
  const int n = 2048;
  std::mt19937 rng(3);
  auto finite = [&]() {
    for (;;) {
      const uint16_t h = static_cast<uint16_t>(rng());
      if ((h & 0x7C00) != 0x7C00) return h;
    }
  };
  std::vector<uint32_t> a(n), b(n), c(n);
  std::vector<float> f(2 * n);
  for (int i = 0; i < n; ++i) {
    a[i] = emu::pack16(finite(), finite());
    b[i] = emu::pack16(finite(), finite());
    c[i] = emu::pack16(finite(), finite());
    f[2 * i] = std::ldexp(static_cast<float>(rng()) / 4294967296.0f - 0.5f, static_cast<int>(rng() % 40) - 20);
    f[2 * i + 1] = std::ldexp(static_cast<float>(rng()) / 4294967296.0f - 0.5f, static_cast<int>(rng() % 40) - 20);
  }
  Buffer ba = upload(a), bb = upload(b), bc = upload(c), bf = upload(f), out(dev, 8 * n * 4);
  dev.launch(wrappers()->kernel("k_half_ops"), {{n / 128}, {128}, 0},
             KernelArgs().add(ba.ptr()).add(bb.ptr()).add(bc.ptr()).add(bf.ptr()).add(out.ptr()).add(n));
  const auto r = out.download<uint32_t>(8 * n);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < 2; ++h) {
      auto part = [h](uint32_t v) { return static_cast<uint16_t>(v >> (16 * h)); };
      const emu::test::i128 sa = emu::test::half_scaled(part(a[i])), sb = emu::test::half_scaled(part(b[i]));
      const emu::test::i128 sc = emu::test::half_scaled(part(c[i]));
      const emu::test::i128 ab = emu::test::half_product_scaled(part(a[i]), part(b[i]));
      INFO("i=" << i << " half=" << h);
      REQUIRE(emu::test::same_half(part(r[8 * i + 0]), emu::test::round_scaled_to_half(sa + sb)));
      REQUIRE(emu::test::same_half(part(r[8 * i + 1]), emu::test::round_scaled_to_half(sa - sb)));
      REQUIRE(emu::test::same_half(part(r[8 * i + 2]), emu::test::round_scaled_to_half(ab)));
      REQUIRE(emu::test::same_half(part(r[8 * i + 3]), emu::test::round_scaled_to_half(ab + sc)));
    }
    REQUIRE(static_cast<uint16_t>(r[8 * i + 5]) == qt::float_to_half_bits(f[2 * i]));
    REQUIRE(static_cast<uint16_t>(r[8 * i + 5] >> 16) == qt::float_to_half_bits(f[2 * i + 1]));
    REQUIRE(static_cast<uint16_t>(r[8 * i + 6]) == qt::float_to_bf16_bits(f[2 * i]));
    REQUIRE(static_cast<uint16_t>(r[8 * i + 6] >> 16) == qt::float_to_bf16_bits(f[2 * i + 1]));
    const emu::test::i128 sc = emu::test::half_scaled(static_cast<uint16_t>(c[i]));
    const emu::test::i128 ab0 = emu::test::half_product_scaled(static_cast<uint16_t>(a[i]), static_cast<uint16_t>(b[i]));
    REQUIRE(emu::test::same_half(static_cast<uint16_t>(r[8 * i + 7]), emu::test::round_scaled_to_half(ab0 + sc)));
    const uint16_t prod = emu::test::round_scaled_to_half(ab0);
    if ((prod & 0x7C00) != 0x7C00) {
      REQUIRE(emu::test::same_half(static_cast<uint16_t>(r[8 * i + 7] >> 16), emu::test::round_scaled_to_half(emu::test::half_scaled(prod) + sc)));
    }
  }
}

TEST_CASE("mma m16n8k16 gathers and scatters every lane and register per the fragment tables") {
  auto& dev = emu::test::device();
  for (const bool bf16 : {false, true}) {
    // Small integers: the products and sums are exact, so D must equal the plain GEMM bit for bit. C is
    // distinct per element and A, B are random, so a misplaced fragment element changes D.
    std::mt19937 rng(bf16 ? 7 : 6);
    std::vector<uint16_t> A(256), B(128);
    std::vector<float> C(128);
    std::vector<float> Af(256), Bf(128);
    for (int i = 0; i < 256; ++i) {
      Af[i] = static_cast<float>(static_cast<int>(rng() % 15) - 7);
      A[i] = bf16 ? qt::float_to_bf16_bits(Af[i]) : qt::float_to_half_bits(Af[i]);
    }
    for (int i = 0; i < 128; ++i) {
      Bf[i] = static_cast<float>(static_cast<int>(rng() % 15) - 7);
      B[i] = bf16 ? qt::float_to_bf16_bits(Bf[i]) : qt::float_to_half_bits(Bf[i]);
      C[i] = static_cast<float>(i) * 1000.0f;
    }
    Buffer bA = upload(A), bB = upload(B), bC = upload(C), bD(dev, 128 * 4);
    dev.launch(wrappers()->kernel(bf16 ? "k_mma<true>" : "k_mma<false>"), {{1}, {32}, 0},
               KernelArgs().add(bA.ptr()).add(bB.ptr()).add(bC.ptr()).add(bD.ptr()));
    const auto D = bD.download<float>(128);
    for (int m = 0; m < 16; ++m) {
      for (int nn = 0; nn < 8; ++nn) {
        float ref = C[m * 8 + nn];
        for (int k = 0; k < 16; ++k) ref += Af[m * 16 + k] * Bf[k * 8 + nn];
        INFO("bf16=" << bf16 << " row " << m << " col " << nn);
        REQUIRE(D[m * 8 + nn] == ref);
      }
    }
  }
}

TEST_CASE("mma m16n8k32 s8 gathers every byte of every lane per the fragment tables and wraps the s32 sum") {
  auto& dev = emu::test::device();
  // The full int8 range, so sign extension of every byte position counts; C is distinct per element. A
  // second run with C near INT32_MAX checks that the sum wraps (no .satfinite), as the GPU instruction does.
  for (const int32_t c_base : {0, 2147483647 - 100000}) {
    std::mt19937 rng(c_base == 0 ? 9 : 10);
    std::vector<int8_t> A(16 * 32), B(32 * 8);
    std::vector<int32_t> C(128);
    for (auto& v : A) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    for (auto& v : B) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    for (int i = 0; i < 128; ++i) C[i] = c_base + i * 1000;
    Buffer bA = upload(A), bB = upload(B), bC = upload(C), bD(dev, 128 * 4);
    dev.launch(wrappers()->kernel("k_mma_s8"), {{1}, {32}, 0},
               KernelArgs().add(bA.ptr()).add(bB.ptr()).add(bC.ptr()).add(bD.ptr()));
    const auto D = bD.download<int32_t>(128);
    for (int m = 0; m < 16; ++m) {
      for (int nn = 0; nn < 8; ++nn) {
        int64_t ref = C[m * 8 + nn];
        for (int k = 0; k < 32; ++k) ref += int64_t{A[m * 32 + k]} * B[k * 8 + nn];
        INFO("C base " << c_base << " row " << m << " col " << nn);
        REQUIRE(D[m * 8 + nn] == static_cast<int32_t>(static_cast<uint32_t>(ref)));
      }
    }
  }
}

TEST_CASE("ldmatrix x1/x2/x4 and .trans deliver each lane's rows and columns per the ISA") {
  auto& dev = emu::test::device();
  std::vector<uint16_t> src(256);
  for (int i = 0; i < 256; ++i) src[i] = static_cast<uint16_t>(i + 1);  // matrix m, row r, col c = m*64+r*8+c+1
  Buffer bs = upload(src), out(dev, 6 * 128 * 4);
  dev.memset(out.ptr(), 0, 6 * 128 * 4);
  dev.launch(wrappers()->kernel("k_ldmatrix"), {{1}, {32}, 0}, KernelArgs().add(bs.ptr()).add(out.ptr()));
  const auto r = out.download<uint32_t>(6 * 128);
  auto M = [](int m, int row, int col) { return static_cast<uint32_t>(m * 64 + row * 8 + col + 1); };
  const int nums[3] = {1, 2, 4};
  for (int v = 0; v < 6; ++v) {
    const bool trans = v >= 3;
    const int num = nums[v % 3];
    for (int lane = 0; lane < 32; ++lane) {
      for (int m = 0; m < num; ++m) {
        // Non-transposed: row lane/4, columns 2(lane%4), +1. Transposed: rows 2(lane%4), +1 of column lane/4.
        const uint32_t lo = trans ? M(m, 2 * (lane % 4), lane / 4) : M(m, lane / 4, 2 * (lane % 4));
        const uint32_t hi = trans ? M(m, 2 * (lane % 4) + 1, lane / 4) : M(m, lane / 4, 2 * (lane % 4) + 1);
        INFO("variant " << v << " lane " << lane << " reg " << m);
        REQUIRE(r[v * 128 + lane * 4 + m] == (lo | (hi << 16)));
      }
    }
  }
}

TEST_CASE("shuffles follow CUDA semantics for every mode, width and delta, and lanes out of range keep their value") {
  auto& dev = emu::test::device();
  const std::vector<int> deltas = {3, 17};
  Buffer bd = upload(deltas), out(dev, 4 * 6 * 2 * 64 * 4);
  dev.launch(wrappers()->kernel("k_shfl"), {{1}, {64}, 0}, KernelArgs().add(bd.ptr()).add(out.ptr()));
  const auto r = out.download<int>(4 * 6 * 2 * 64);
  const int widths[6] = {1, 2, 4, 8, 16, 32};
  for (int tid = 0; tid < 64; ++tid) {
    const int lane = tid % 32, base = 1000 * (tid / 32);
    auto val = [&](int l) { return base + 7 * l + 1; };
    for (int w = 0; w < 6; ++w) {
      const int W = widths[w], seg = lane / W * W;
      for (int d = 0; d < 2; ++d) {
        const int delta = deltas[d];
        INFO("tid " << tid << " width " << W << " delta " << delta);
        REQUIRE(r[((0 * 6 + w) * 2 + d) * 64 + tid] == val(seg + delta % W));
        REQUIRE(r[((1 * 6 + w) * 2 + d) * 64 + tid] == (lane % W >= delta ? val(lane - delta) : val(lane)));
        REQUIRE(r[((2 * 6 + w) * 2 + d) * 64 + tid] == (lane % W + delta < W ? val(lane + delta) : val(lane)));
        const int x = lane ^ delta;
        REQUIRE(r[((3 * 6 + w) * 2 + d) * 64 + tid] == (x < seg + W ? val(x) : val(lane)));
      }
    }
  }
}

TEST_CASE("ballot, any and all, with full and partial member masks") {
  auto& dev = emu::test::device();
  std::vector<int> pred(64);
  for (int i = 0; i < 64; ++i) pred[i] = (i * 7 % 5) == 0 ? 1 : 0;
  for (int i = 32; i < 64; ++i) pred[i] = 1;  // warp 1: all true
  Buffer bp = upload(pred), out(dev, 64 * 5 * 4);
  dev.launch(wrappers()->kernel("k_vote"), {{1}, {64}, 0}, KernelArgs().add(bp.ptr()).add(out.ptr()));
  const auto r = out.download<unsigned>(64 * 5);
  for (int w = 0; w < 2; ++w) {
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) ballot |= (pred[32 * w + l] ? 1u : 0u) << l;
    for (int l = 0; l < 32; ++l) {
      const int tid = 32 * w + l;
      const unsigned half = l < 16 ? 0x0000FFFFu : 0xFFFF0000u;
      REQUIRE(r[tid * 5 + 0] == ballot);
      REQUIRE(r[tid * 5 + 1] == (ballot != 0 ? 1u : 0u));
      REQUIRE(r[tid * 5 + 2] == (ballot == 0xFFFFFFFFu ? 1u : 0u));
      REQUIRE(r[tid * 5 + 3] == (ballot & half));
      REQUIRE(r[tid * 5 + 4] == static_cast<unsigned>(tid ^ 1));
    }
  }
}

TEST_CASE("cp.async copies 4/8/16 bytes, zero-fills past src-size and completes groups in order") {
  auto& dev = emu::test::device();
  std::vector<uint8_t> src(1536);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 1) | 1;  // never zero
  Buffer bs = upload(src), out(dev, 1536);
  dev.launch(wrappers()->kernel("k_cp_async"), {{1}, {32}, 0}, KernelArgs().add(bs.ptr()).add(out.ptr()));
  const auto r = out.download<uint8_t>(1536);
  for (int t = 0; t < 32; ++t) {
    for (int i = 0; i < 16; ++i) {
      INFO("thread " << t << " byte " << i);
      REQUIRE(r[t * 16 + i] == (i < t % 17 ? src[t * 16 + i] : 0));
      const int lim1 = i < 8 ? t % 9 : 16;
      REQUIRE(r[512 + t * 16 + i] == (i < lim1 ? src[512 + t * 16 + i] : 0));
      const int piece = i / 4, lim2 = piece == 0 ? t % 5 : (piece == 2 ? 0 : 4);
      REQUIRE(r[1024 + t * 16 + i] == (i % 4 < lim2 ? src[1024 + t * 16 + i] : 0));
    }
  }
}

TEST_CASE("ldg_stream_u4 with an evict-first policy returns the 16 bytes at its address") {
  auto& dev = emu::test::device();
  std::vector<uint32_t> src(4 * 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i * 2654435761u);
  Buffer bs = upload(src), out(dev, src.size() * 4);
  dev.launch(wrappers()->kernel("k_ldg_stream"), {{2}, {32}, 0}, KernelArgs().add(bs.ptr()).add(out.ptr()));
  CHECK(out.download<uint32_t>(src.size()) == src);
}

TEST_CASE("atomics are exact across blocks running on several host threads") {
  auto& dev = emu::test::device();
  Buffer count(dev, 4), sum(dev, 4), maxv(dev, 4), cas(dev, 8);
  for (Buffer* b : {&count, &sum, &maxv, &cas}) dev.memset(b->ptr(), 0, b->bytes());
  dev.launch(wrappers()->kernel("k_atomics"), {{16}, {64}, 0},
             KernelArgs().add(count.ptr()).add(sum.ptr()).add(maxv.ptr()).add(cas.ptr()));
  CHECK(count.download<int>(1)[0] == 1024);
  CHECK(sum.download<float>(1)[0] == 512.0f);
  CHECK(maxv.download<unsigned>(1)[0] == 1023u);
  CHECK(cas.download<unsigned long long>(1)[0] == 1024ull);
}

TEST_CASE("barrier reductions, dynamic shared memory and QT_ARCH") {
  auto& dev = emu::test::device();
  std::vector<int> pred(96);
  for (int i = 0; i < 96; ++i) pred[i] = (i % 3 == 0) ? 1 : 0;
  Buffer bp = upload(pred), out(dev, 5 * 4);
  dev.launch(wrappers()->kernel("k_barrier_ops"), {{1}, {96}, 96 * 4}, KernelArgs().add(bp.ptr()).add(out.ptr()));
  const auto r = out.download<int>(5);
  int s = 0;
  for (int i = 0; i < 96; ++i) s += pred[i] * (i + 1);
  CHECK(r[0] == 32);
  CHECK(r[1] == 0);
  CHECK(r[2] == 1);
  CHECK(r[3] == s);
  CHECK(r[4] == 80);
}

TEST_CASE("thread scheduling is random per seed and reproducible for a fixed seed") {
  auto order = [](uint64_t seed) {
    emu::EmuDevice dev(emu::test::test_options(seed));
    auto mod = emu::test::module("wrappers.cu", kKernels, dev);
    Buffer out(dev, 128 * 4);
    dev.launch(mod->kernel("k_order"), {{1}, {128}, 0}, KernelArgs().add(out.ptr()));
    return out.download<int>(128);
  };
  const auto a = order(1), b = order(1), c = order(2);
  CHECK(a == b);
  CHECK(a != c);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 128; ++i) REQUIRE(sorted[i] == i);
}
