// Correct kernels on the emulator against CPU references: a block reduction and a tiled tensor-core GEMM
// with a cp.async pipeline, ldmatrix and mma (tests/emu/kernels/gemm.cu). All checks stay on, so these also
// show the race detector raises no false alarm on properly synchronised code.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "common/half.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;
using dev::Buffer;
using dev::KernelArgs;

namespace {
const std::vector<std::string> kKernels = {"k_reduce<128>", "k_reduce<256>", "k_gemm<2>", "k_gemm<3>"};
std::shared_ptr<dev::Module> gemm_module() { return emu::test::module("gemm.cu", kKernels); }
}  // namespace

TEST_CASE("block reduction matches a double-precision CPU sum") {
  auto& dev = emu::test::device();
  for (const char* k : {"k_reduce<128>", "k_reduce<256>"}) {
    const int n = 5000, blocks = 6;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(n);
    double ref = 0;
    for (float& v : x) {
      v = u(rng);
      ref += v;
    }
    Buffer bx(dev, n * 4), part(dev, blocks * 4);
    bx.upload(x);
    const uint32_t threads = std::string(k) == "k_reduce<128>" ? 128 : 256;
    dev.launch(gemm_module()->kernel(k), {{blocks}, {threads}, 0}, KernelArgs().add(bx.ptr()).add(part.ptr()).add(n));
    const auto p = part.download<float>(blocks);
    double got = 0;
    for (float v : p) got += v;
    INFO(k);
    CHECK(std::fabs(got - ref) < 1e-3);
  }
}

TEST_CASE("tiled mma GEMM with a cp.async pipeline matches a CPU GEMM, including an M tail") {
  auto& dev = emu::test::device();
  struct Shape {
    int m, n, k;
    const char* kernel;
  };
  for (const Shape s : {Shape{37, 64, 96, "k_gemm<2>"}, Shape{32, 32, 32, "k_gemm<3>"}, Shape{70, 96, 64, "k_gemm<3>"}}) {
    std::mt19937 rng(static_cast<uint32_t>(s.m * 131 + s.k));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<uint16_t> A(static_cast<size_t>(s.m) * s.k), B(static_cast<size_t>(s.k) * s.n);
    for (auto& v : A) v = qt::float_to_half_bits(u(rng));
    for (auto& v : B) v = qt::float_to_half_bits(u(rng));
    Buffer bA(dev, A.size() * 2), bB(dev, B.size() * 2), bC(dev, static_cast<size_t>(s.m) * s.n * 4);
    bA.upload(A);
    bB.upload(B);
    const dev::Dim3 grid{static_cast<uint32_t>(s.n / 32), static_cast<uint32_t>((s.m + 31) / 32), 1};
    dev.launch(gemm_module()->kernel(s.kernel), {grid, {128}, 0},
               KernelArgs().add(bA.ptr()).add(bB.ptr()).add(bC.ptr()).add(s.m).add(s.n).add(s.k));
    const auto C = bC.download<float>(static_cast<size_t>(s.m) * s.n);
    for (int i = 0; i < s.m; ++i) {
      for (int j = 0; j < s.n; ++j) {
        double ref = 0;
        for (int kk = 0; kk < s.k; ++kk) {
          ref += static_cast<double>(qt::half_bits_to_float(A[static_cast<size_t>(i) * s.k + kk])) *
                 qt::half_bits_to_float(B[static_cast<size_t>(kk) * s.n + j]);
        }
        INFO(s.kernel << " M=" << s.m << " N=" << s.n << " K=" << s.k << " at (" << i << "," << j << ")");
        REQUIRE(std::fabs(C[static_cast<size_t>(i) * s.n + j] - ref) <= 1e-4 * (1.0 + std::fabs(ref)));
      }
    }
  }
}
