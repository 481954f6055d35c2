// qbench --device cuda --report on a GPU (label gpu): the whole report measured for real, cuBLASLt and the
// copy kernel included. Without a driver it reports itself skipped, with the reason.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "device/cuda/cuda_device.h"
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
                            " --buckets 1,16 --prompts 8 --gen 4 --repeat 1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::ifstream in(dir + "/report.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j["device"]["bandwidth_gbps"].get<double>() > 50);
    for (const auto& k : j["kernels"]) {
      INFO(k.dump());
      for (const auto& v : k["variants"]) {
        if (v["name"] == "fp16 cublas") CHECK(v["seconds"].get<double>() > 0);  // fp16 cuBLASLt runs every shape
        if (v["name"] == "dequant+cublas" && (k["type"] == "AWQ_INT4" || k["type"] == "Q8_0"))
          CHECK(v["seconds"].get<double>() > 0);
      }
    }
    std::filesystem::remove_all(dir);
  }
}
