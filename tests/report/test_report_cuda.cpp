// qbench --device cuda --report on a GPU (label gpu): the whole report measured for real, cuBLASLt and the
// copy kernel included. Without a driver it reports itself skipped, with the reason.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "device/cuda/cuda_device.h"
#include "runtime/report/report_json.h"
#include "tests/skip.h"
#include "common/paths.h"

using namespace std::string_literals;

TEST_CASE("cuda: qbench --report times every variant of every linear shape, cuBLASLt included") {
  if (!qt::cuda::cuda_available()) QTUNE_SKIP("no CUDA GPU: " + qt::cuda::cuda_unavailable_reason());
  // AWQ (in the frag layout) and Q8_0 each have a dequant + cuBLASLt baseline; the fp16 lm_head has none.
  for (const char* model : {"dense.ak48", "dense.ajc1"}) {
    INFO(model);
    const std::string dir = qt::binary_root() + "/tests/report-cuda-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    const std::string cmd = qt::binary_root() + "/bin/qbench --device cuda --model " + qt::source_root() +
                            "/tests/golden/files/" + model + " --report " + dir +
                            " --buckets 1,16,64 --prompts 8 --gen 4 --repeat 1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::ifstream in(dir + "/report.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j["device"]["bandwidth_gbps"].get<double>() > 50);
    const bool hopper = j["device"]["fingerprint"].get<std::string>().find("\"arch\":\"sm_90\"") != std::string::npos;
    for (const auto& k : j["kernels"]) {
      INFO(k.dump());
      bool wgmma = false, frag = false;
      for (const auto& v : k["variants"]) {
        frag = frag || v["name"] == "file layout default";  // the row runs in the frag layout
        if (v["name"] == "fp16 cublas") CHECK(v["seconds"].get<double>() > 0);  // fp16 cuBLASLt runs every shape
        if (v["name"] == "dequant+cublas" && (k["type"] == "AWQ_INT4" || k["type"] == "Q8_0"))
          CHECK(v["seconds"].get<double>() > 0);
        // Every other family serving the shape runs at its default point (compiled by NVRTC, timed).
        const std::string family = qt::report::family_of_default(v["name"].get<std::string>());
        if (!family.empty()) CHECK(v["seconds"].get<double>() > 0);
        wgmma = wgmma || family.find("_frag_wgmma_gemm") != std::string::npos;
      }
      // On sm_90 the frag layout's Hopper GEMM is among them at every M (not for the lm_head: the file layout).
      if (hopper && frag) CHECK(wgmma);
      // "default" is what the runtime runs without a tuned store (device/blas/default_route.h): fp16 weights
      // above one row on cuBLASLt, frag-layout weights from 64 rows on their dequant + cuBLASLt.
      std::string runtime_default;
      for (const auto& v : k["variants"])
        if (v["name"] == "default") runtime_default = v.value("detail", "");
      const bool blas_route = (k["type"] == "F16" && k["M"].get<int>() > 1) || (frag && k["M"].get<int>() >= 64);
      CHECK((runtime_default.find("the runtime's default route") != std::string::npos) == blas_route);
    }
    // Attention decode at 4K and 32K context, the goal contexts, each variant timed with its KV bytes.
    REQUIRE(j["attention_decode"]["rows"].size() == 2);
    for (const auto& row : j["attention_decode"]["rows"])
      for (const auto& v : row["variants"]) {
        INFO(v.dump());
        CHECK(v["seconds"].get<double>() > 0);
        CHECK(v["bytes"].get<double>() > 0);
      }
    // The launch rows: stream and graph chains timed per launch; PDL timed from sm_90, else said unavailable.
    REQUIRE(j["launch_cost"]["rows"].size() == 2);
    for (const auto& row : j["launch_cost"]["rows"])
      for (const auto& v : row["variants"]) {
        INFO(v.dump());
        const bool pdl = v["name"].get<std::string>().find("PDL") != std::string::npos;
        if (!pdl || hopper) CHECK(v["seconds"].get<double>() > 0);
      }
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("cuda: qbench --report times the grouped MoE GEMMs against the experts one by one on cuBLASLt") {
  if (!qt::cuda::cuda_available()) QTUNE_SKIP("no CUDA GPU: " + qt::cuda::cuda_unavailable_reason());
  const std::string dir = qt::binary_root() + "/tests/report-cuda-moe-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string cmd = qt::binary_root() + "/bin/qbench --device cuda --model " + qt::source_root() +
                          "/tests/golden/files/moe-norm.int8-sym.moe3 --report " + dir +
                          " --buckets 1,512 --prompts 8 --gen 4 --repeat 1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(dir + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const auto& rows = j["moe_grouped"]["rows"];
  REQUIRE(rows.size() == 4);
  for (const auto& row : rows) {
    INFO(row.dump());
    for (const auto& v : row["variants"]) {
      // Tuned, default and the baseline all ran; the Hopper grouped GEMMs where the GPU and shape allow.
      if (v.contains("unavailable")) {
        CHECK(v["name"].get<std::string>().rfind("frag ", 0) == 0);
        continue;
      }
      CHECK(v["seconds"].get<double>() > 0);
      // The baseline multiplied the same rows by the same experts: its output is the grouped kernel's, to
      // within fp16 rounding (the detail's "max |difference| ... %.3g (outputs up to %.3g)").
      if (v["name"] == "cublas one by one") {
        const std::string d = v["detail"].get<std::string>();
        const auto at = d.find("max |difference| from the tuned grouped output ");
        REQUIRE(at != std::string::npos);
        double diff = 0, largest = 0;
        REQUIRE(std::sscanf(d.c_str() + at, "max |difference| from the tuned grouped output %lf (outputs up to %lf)",
                            &diff, &largest) == 2);
        CHECK(largest > 0);
        CHECK(diff <= 0.01 * largest + 1e-3);
      }
    }
  }
  std::filesystem::remove_all(dir);
}
