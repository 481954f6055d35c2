#pragma once
// The store of qtune's first GPU run (an H200, 2026-11-26; tests/tuner/data/README.md), for the tests that
// read its measurements: a scratch copy with the rows filed under today's source hash of the awq_frag
// families, once the kernel source the GPU ran is checked to be byte for byte today's.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/paths.h"
#include "common/sha256.h"
#include "kernels_src/registry/registry.h"
#include "tests/tuner/scratch_path.h"

namespace qt::test {

// The frag linear kernel both H200 runs measured (commit b80cebf's and 5355fe8's frag_linear.cuh), less the
// kernels' programmatic-launch entry line, added since: launched as the tuner and the report launch (without
// the launch attribute) its wait returns at once, so the kernels do what the GPU measured. A test that holds
// the model to those runs' frag linear rows requires today's file to be it.
inline void require_frag_linear_as_measured() {
  constexpr const char* kMeasuredKernelSha256 = "8db423c90e71034b252889591c6b5043df534f7526a73fa26855188da53ad189";
  std::ifstream in(source_root() + "/kernels_src/fraglinear/frag_linear.cuh", std::ios::binary);
  std::string text;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(' ') == std::string::npos || line.substr(line.find_first_not_of(' ')) != "qt::grid_dependency_entry();")
      text += line + "\n";
  REQUIRE(compile::sha256_hex(text) == kMeasuredKernelSha256);
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
