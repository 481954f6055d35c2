#pragma once
// One NVRTC compilation: source text + options + name expressions + architecture -> CUBIN, the lowered
// (mangled) names of the requested template instantiations, and the ptxas resource report. Thread-safe:
// each call owns its nvrtcProgram.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device/arch/ptxas_report.h"

namespace qt::compile {

struct CompileRequest {
  std::string program_name;  // shown in diagnostics, e.g. "awq/awq_gemv.cu"
  std::string source;
  std::vector<std::string> options;  // in addition to the architecture, include paths and -Xptxas=-v
  std::vector<std::string> name_expressions;
  int sm = 80;
};

struct CompileOutput {
  std::vector<uint8_t> cubin;
  std::map<std::string, std::string> lowered_names;  // name expression -> mangled entry name
  std::vector<KernelResources> resources;
  std::string log;
  double seconds = 0.0;
};

// Throws qt::Error (exit code 1) with the compiler log on a compile failure, and on a compile whose ptxas
// log has no resource report for one of its kernels (after one retry): such an output is of no use to the
// tuner, and cached it would fail every later point with the same kernels.
CompileOutput nvrtc_compile(const CompileRequest& request);

// The name expressions of `out` whose lowered kernel has no ptxas entry in out.resources ("" when complete).
std::string unreported_kernels(const CompileOutput& out);

// The NVRTC target of an architecture: "sm_86"; for 90, "sm_90a", whose wgmma and setmaxnreg the Hopper
// kernels need (an sm_90a CUBIN runs on every sm_90 GPU, H100 and H200 alike).
std::string nvrtc_target(int sm);

// "13.0"-style version of the NVRTC library actually loaded.
std::string nvrtc_version();

// Directories NVRTC needs: the CUDA include dir (cuda_fp16.h), its cccl/ subdir (cuda/std/*) and the qtune
// source root (kernels include "kernels_src/..."). Found at run time; throws qt::Error if the CUDA headers
// cannot be located.
std::vector<std::string> include_dirs();
std::string cuda_include_dir();

// Files of the source tree that `source` includes with #include "...", transitively, resolved against the
// qtune source root and the including file's folder. Returns (path relative to the source root, contents),
// sorted by path: what the cache key must cover.
std::vector<std::pair<std::string, std::string>> local_includes(const std::string& source,
                                                                 const std::string& from_dir = "");

}  // namespace qt::compile
