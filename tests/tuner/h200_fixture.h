#pragma once
// The store of qtune's first GPU run (an H200, 2026-11-26; tests/tuner/data/README.md), for the tests that
// read its measurements: a scratch copy with the rows filed under today's source hash of the awq_frag
// families, once the kernel the GPU ran is checked to compile to today's machine code.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/paths.h"
#include "common/sha256.h"
#include "device/jit/cubin_identity.h"
#include "device/jit/nvrtc_compiler.h"
#include "kernels_src/registry/registry.h"
#include "tests/tuner/scratch_path.h"

namespace qt::test {

// The frag linear kernel the H200 runs measured (commit b80cebf's and 5355fe8's frag_linear.cuh; the third run
// ran the same file), kept in tests/tuner/data/measured-kernels/h200-2026-11-26 with the programmatic-launch
// entry line added since: launched as the tuner and the reports launch (without the launch attribute) its wait
// returns at once, so the kernels do what the GPU measured. Since then the template took ZPF (a group's scales
// and zeros loaded a group ahead) and RU (split-K outputs summed at once), and points stored before them ran
// ZPF = 0 and RU = 1 (their absent_value). A test that holds the model to those runs' frag linear rows requires
// that copy to be the file measured, and today's kernels at ZPF = 0, RU = 1 to compile to the same machine code as
// it, instantiation for instantiation, on sm_90a (the H200's target) and sm_80: GEMV and GEMM, INT4 and INT8, the
// tilings the fixtures hold. Both compile against today's shared headers (qt_cuda.h, splitk.cuh): what this
// proves is that frag_linear.cuh's changes since leave those kernels as they were.
inline void require_frag_linear_as_measured() {
  constexpr const char* kMeasuredKernelSha256 = "8db423c90e71034b252889591c6b5043df534f7526a73fa26855188da53ad189";
  const std::string measured_path =
      source_root() + "/tests/tuner/data/measured-kernels/h200-2026-11-26/kernels_src/fraglinear/frag_linear.cuh";
  std::ifstream in(measured_path, std::ios::binary);
  std::string measured, text;
  for (std::string line; std::getline(in, line);) {
    measured += line + "\n";
    if (line.find_first_not_of(' ') == std::string::npos || line.substr(line.find_first_not_of(' ')) != "qt::grid_dependency_entry();")
      text += line + "\n";
  }
  REQUIRE(compile::sha256_hex(text) == kMeasuredKernelSha256);
  // Compiled once per test process: about 10 s of NVRTC.
  static const std::string mismatch = [&measured] {
    const std::vector<std::string> args = {"4, 1, 2, 3, 2, 1, 64, 1", "4, 1, 1, 2, 1, 1, 64, 1", "4, 1, 4, 2, 1, 1, 32, 1",
                                           "4, 1, 2, 3, 4, 1, 64, 2", "8, 1, 2, 3, 2, 1, 64, 1", "4, 2, 4, 3, 2, 0, 64, 1",
                                           "8, 2, 4, 3, 2, 0, 64, 1"};
    std::ifstream today_in(source_root() + "/kernels_src/fraglinear/frag_linear.cuh", std::ios::binary);
    const std::string today((std::istreambuf_iterator<char>(today_in)), std::istreambuf_iterator<char>());
    for (int sm : {90, 80}) {
      compile::CompileRequest then{"frag_linear.cuh (measured)", measured, {}, {}, sm};
      compile::CompileRequest now{"frag_linear.cuh", today, {}, {}, sm};
      for (const std::string& a : args) {
        then.name_expressions.push_back("frag_linear_kernel<" + a + ">");
        now.name_expressions.push_back("frag_linear_kernel<" + a + ", 0, 1>");
      }
      if (compile::code_digest(compile::nvrtc_compile(then).cubin) != compile::code_digest(compile::nvrtc_compile(now).cubin))
        return "sm_" + std::to_string(sm) + ": today's frag_linear.cuh at ZPF = 0, RU = 1 is not the machine code measured";
    }
    return std::string();
  }();
  INFO(mismatch);
  REQUIRE(mismatch.empty());
}

// The rows were measured on the awq_frag kernels of commit b80cebf; the families' source hash then also
// covered host code since changed (references, not launches). When the kernel source differs, the fixture no
// longer describes these kernels: measure again on a GPU (scripts/gpu/run.sh) and replace it.
// `store` is either H200 run's store under tests/tuner/data: both ran the same frag_linear.cuh.
inline std::string h200_fixture_for_todays_sources(const std::string& name,
                                                   const std::string& store = "h200-2026-11-26-8b-frag.sqlite") {
  require_frag_linear_as_measured();
  const std::string path = tuner_scratch(name, ".sqlite");
  std::filesystem::copy_file(source_root() + "/tests/tuner/data/" + store, path);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  for (const char* family : {"awq_frag_gemv", "awq_frag_gemm"}) {
    const std::string sql = "UPDATE kernel SET source_hash='" + kernels::find_family(family).source_hash +
                            "' WHERE family='cuda." + family + "'";
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  sqlite3_close(db);
  return path;
}

}  // namespace qt::test
