// The emulator computes what the GPU computes where the GPU's rule is known: fp32 a*b+c is contracted into
// one fused multiply-add as NVRTC does by default (checked against the PTX NVRTC emits for the same kernel),
// and __hmax/__hmin follow cuda_fp16.h for NaN and signed zero.
#include <catch2/catch.hpp>

#include <nvrtc.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "tests/emu/emu_test_util.h"
#include "common/paths.h"

using namespace qt;
using dev::Buffer;
using dev::KernelArgs;

namespace {

const std::vector<std::string> kKernels = {"k_mul_add", "k_hmax_hmin"};

std::string nvrtc_ptx(const std::string& kernel) {
  const std::string src = emu::read_text_file(qt::source_root() + "/tests/emu/kernels/fidelity.cu");
  nvrtcProgram prog;
  REQUIRE(nvrtcCreateProgram(&prog, src.c_str(), "fidelity.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  REQUIRE(nvrtcAddNameExpression(prog, kernel.c_str()) == NVRTC_SUCCESS);
  const std::vector<std::string> opts = {"--gpu-architecture=compute_80", "-std=c++17", "-I" + qt::source_root(),
                                         "-I" QTUNE_CUDA_INCLUDE_DIR};  // NVRTC's defaults otherwise: --fmad=true
  std::vector<const char*> o;
  for (const auto& s : opts) o.push_back(s.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(o.size()), o.data());
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(prog, log.data());
  INFO(log);
  REQUIRE(r == NVRTC_SUCCESS);
  nvrtcGetPTXSize(prog, &n);
  std::string ptx(n, '\0');
  nvrtcGetPTX(prog, ptx.data());
  nvrtcDestroyProgram(&prog);
  return ptx;
}

size_t count(const std::string& s, const std::string& what) {
  size_t c = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++c;
  return c;
}

uint16_t hmax_doc(uint16_t a, uint16_t b, bool max) {
  auto nan = [](uint16_t h) { return (h & 0x7fff) > 0x7c00; };
  auto val = [](uint16_t h) { return static_cast<double>(qt::half_bits_to_float(h)); };
  if (nan(a) && nan(b)) return 0x7fff;  // canonical NaN
  if (nan(a)) return b;
  if (nan(b)) return a;
  if (val(a) == 0 && val(b) == 0) {  // +0 > -0
    const bool a_pos = !(a & 0x8000), b_pos = !(b & 0x8000);
    if (max) return (a_pos || b_pos) ? 0x0000 : 0x8000;
    return (!a_pos || !b_pos) ? 0x8000 : 0x0000;
  }
  return max ? (val(a) > val(b) ? a : b) : (val(a) < val(b) ? a : b);
}

}  // namespace

TEST_CASE("fp32 a*b+c is one fused multiply-add on the emulator, as in the PTX NVRTC emits by default") {
  const std::string ptx = nvrtc_ptx("k_mul_add");
  INFO(ptx);
  CHECK(count(ptx, "fma.rn.f32") == 1);
  CHECK(count(ptx, "mul.f32") + count(ptx, "mul.rn.f32") == 0);

  auto& dev = emu::test::device();
  const int n = 1000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) a[i] = u(rng), b[i] = u(rng), c[i] = u(rng);
  Buffer ba(dev, n * 4), bb(dev, n * 4), bc(dev, n * 4), out(dev, n * 4);
  ba.upload(a), bb.upload(b), bc.upload(c);
  dev.launch(emu::test::module("fidelity.cu", kKernels)->kernel("k_mul_add"), {{8}, {128}, 0},
             KernelArgs().add(ba.ptr()).add(bb.ptr()).add(bc.ptr()).add(out.ptr()).add(n));
  const auto got = out.download<float>(n);
  int fused = 0, differs_from_unfused = 0;
  for (int i = 0; i < n; ++i) {
    const float want = std::fma(a[i], b[i], c[i]);
    fused += std::memcmp(&got[i], &want, 4) == 0;
    volatile float p = a[i] * b[i];
    differs_from_unfused += got[i] != p + c[i];
  }
  CHECK(fused == n);
  CHECK(differs_from_unfused > 100);  // the inputs do tell fused from unfused apart
}

TEST_CASE("__hmax and __hmin follow cuda_fp16.h for NaN inputs and signed zeros") {
  const std::vector<uint16_t> in = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7e00, 0x7c01, 0xfe00, 0x7c00, 0xfc00, 0x7bff};
  const int n = static_cast<int>(in.size());
  auto& dev = emu::test::device();
  Buffer bin(dev, n * 2), bmax(dev, n * n * 2), bmin(dev, n * n * 2);
  bin.upload(in);
  dev.launch(emu::test::module("fidelity.cu", kKernels)->kernel("k_hmax_hmin"), {{1}, {static_cast<uint32_t>(n * n)}, 0},
             KernelArgs().add(bin.ptr()).add(bmax.ptr()).add(bmin.ptr()).add(n));
  const auto mx = bmax.download<uint16_t>(n * n), mn = bmin.download<uint16_t>(n * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      INFO("a=0x" << std::hex << in[i] << " b=0x" << in[j]);
      CHECK(mx[i * n + j] == hmax_doc(in[i], in[j], true));
      CHECK(mn[i * n + j] == hmax_doc(in[i], in[j], false));
    }
  }
}
