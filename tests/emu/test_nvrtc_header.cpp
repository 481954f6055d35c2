// The device header compiles with NVRTC to CUBIN for sm_80 and sm_90 (ptxas runs inside NVRTC, so every
// inline-PTX wrapper is validated against the real assembler): the same kernel sources the emulator runs,
// with no #ifdef in their bodies. No GPU or driver is needed.
#include <catch2/catch.hpp>

#include <nvrtc.h>

#include <string>
#include <vector>

#include "device/emu/emu_device.h"
#include "common/paths.h"

namespace {

struct NvrtcResult {
  nvrtcResult status;
  std::string log;
  size_t cubin_bytes = 0;
  std::vector<std::string> lowered;
};

NvrtcResult compile(const std::string& file, const std::vector<std::string>& kernels, const std::string& arch) {
  const std::string src = qt::emu::read_text_file(qt::source_root() + "/tests/emu/kernels/" + file);
  nvrtcProgram prog;
  REQUIRE(nvrtcCreateProgram(&prog, src.c_str(), file.c_str(), 0, nullptr, nullptr) == NVRTC_SUCCESS);
  for (const std::string& k : kernels) REQUIRE(nvrtcAddNameExpression(prog, k.c_str()) == NVRTC_SUCCESS);
  const std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17", "-I" + qt::source_root(),
                                         "-I" QTUNE_CUDA_INCLUDE_DIR};
  std::vector<const char*> o;
  for (const auto& s : opts) o.push_back(s.c_str());
  NvrtcResult r;
  r.status = nvrtcCompileProgram(prog, static_cast<int>(o.size()), o.data());
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  r.log.resize(n);
  nvrtcGetProgramLog(prog, r.log.data());
  if (r.status == NVRTC_SUCCESS) {
    nvrtcGetCUBINSize(prog, &r.cubin_bytes);
    for (const std::string& k : kernels) {
      const char* name = nullptr;
      if (nvrtcGetLoweredName(prog, k.c_str(), &name) == NVRTC_SUCCESS && name) r.lowered.emplace_back(name);
    }
  }
  nvrtcDestroyProgram(&prog);
  return r;
}

}  // namespace

TEST_CASE("kernel sources using every wrapper compile with NVRTC to CUBIN for sm_80 and sm_90") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> modules = {
      {"wrappers.cu",
       {"k_lop3", "k_prmt", "k_dequant", "k_half_ops", "k_mma<false>", "k_mma<true>", "k_mma_s8", "k_ldmatrix",
        "k_shfl", "k_vote", "k_cp_async", "k_ldg_stream", "k_atomics", "k_barrier_ops", "k_order"}},
      {"gemm.cu", {"k_reduce<128>", "k_gemm<3>"}},
      {"block_sum.cu", {"block_sum<128>"}},
      {"buggy.cu", {"k_missing_wait", "k_misaligned_ldmatrix", "k_warp_deadlock", "k_trap"}},
  };
  for (const std::string arch : {"sm_80", "sm_90"}) {
    for (const auto& [file, kernels] : modules) {
      const NvrtcResult r = compile(file, kernels, arch);
      INFO(file << " for " << arch << ":\n" << r.log);
      REQUIRE(r.status == NVRTC_SUCCESS);
      CHECK(r.cubin_bytes > 0);
      CHECK(r.lowered.size() == kernels.size());
    }
  }
}
