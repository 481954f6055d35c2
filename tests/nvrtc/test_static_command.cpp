// `qtune static` end to end: tables for the default shapes and for an ak48 model written here, cache hits
// on a second run, JSON output, and one-line errors for bad input.
#include <catch2/catch.hpp>

#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "models/formats/model_writer.h"
#include "tests/nvrtc/temp_dir.h"
#include "tuner/static/static_command.h"

using qt::compile::run_static_command;

namespace {

struct Captured {
  int rc = -1;
  std::string out;
};

Captured run(const std::vector<std::string>& args) {
  std::ostringstream buf;
  auto* old = std::cout.rdbuf(buf.rdbuf());
  Captured c;
  try {
    c.rc = run_static_command(args);
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  c.out = buf.str();
  return c;
}

// A tiny Qwen3 model in the given format, random weights.
void write_model(const std::string& path, qt::FileFormat format) {
  qt::WriterOptions opt;
  opt.format = format;
  auto& c = opt.config;
  c.dim = 128, c.hidden_dim = 384, c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32;
  c.vocab_size = 256, c.max_seq_len = 64, c.group_size = format == qt::FileFormat::AK48 ? 64 : 0;
  auto w = qt::ModelWriter::create(path, opt);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (const auto& slot : w->plan()) {
    std::vector<float> v(static_cast<size_t>(slot.rows * slot.cols));
    for (auto& x : v) x = nd(rng);
    w->write_float(slot, v.data());
  }
  w->finish();
}

}  // namespace

TEST_CASE("qtune static prints each default point's resources and reuses the cache on a second run") {
  qt::test::TempDir dir("static-cache");
  const std::vector<std::string> args = {"--gpu", "sm86", "--kernel", "awq_gemv", "--cache-dir", dir.str()};
  const Captured first = run(args);
  CHECK(first.rc == 0);
  CHECK(first.out.find("sm_86") != std::string::npos);
  CHECK(first.out.find("awq_gemv_kernel<4, 1, 1>") != std::string::npos);
  CHECK(first.out.find("splitk_reduce_kernel<256>") != std::string::npos);  // the shared split-k reduction
  // q, k and v concatenated, as the device runtime runs them at decode (models/core/linear_shapes.h)
  CHECK(first.out.find("M=1 N=6144 K=4096 G=128") != std::string::npos);
  CHECK(first.out.find("M=1 N=4096 K=12288 G=128") != std::string::npos);  // Qwen3-8B down_proj
  CHECK(first.out.find("0 from cache") != std::string::npos);
  const Captured second = run(args);
  CHECK(second.out.find("(hit)") != std::string::npos);
  CHECK(second.out.find(" 0 compiled") != std::string::npos);
}

TEST_CASE("qtune static on an ak48 model analyses the model's own shapes and writes JSON") {
  qt::test::TempDir dir("static-model");
  const std::string model = dir.str() + "/tiny.ak48";
  write_model(model, qt::FileFormat::AK48);
  const std::string json = dir.str() + "/static.json";
  const Captured c = run({"--gpu", "sm_80", "--model", model, "--kernel", "awq_gemm", "--cache-dir",
                          dir.str() + "/cache", "--json", json, "--m", "40"});
  CHECK(c.rc == 0);
  CHECK(c.out.find("tiny.ak48 (ak48, 1 layers)") != std::string::npos);
  CHECK(c.out.find("M=40 N=128 K=128 G=64") != std::string::npos);   // wq / wo
  CHECK(c.out.find("M=40 N=384 K=128 G=64") != std::string::npos);   // gate / up
  CHECK(c.out.find("M=40 N=128 K=384 G=64") != std::string::npos);   // down
  std::ifstream in(json);
  REQUIRE(in);
  const auto j = nlohmann::json::parse(in);
  CHECK(j["gpu"] == "sm_80");
  REQUIRE(j["families"].size() == 1);
  CHECK(j["families"][0]["points"].size() == 3);
  // N = 64 (wk, wv) cannot use the bn = 128 point, and G = 64 rules out bk = 64 only where G % bk != 0.
  bool saw_kv = false;
  for (const auto& s : j["families"][0]["shapes"]) {
    if (s["n"] == 64) {
      saw_kv = true;
      CHECK(s["usable_points"] == 2);
    }
  }
  CHECK(saw_kv);
}

TEST_CASE("qtune static rejects bad input with one clear error") {
  auto exit_code_of = [](const std::vector<std::string>& args) {
    try {
      run(args);
    } catch (const qt::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      return e.exit_code();
    }
    return 0;
  };
  CHECK(exit_code_of({"--gpu", "sm70"}) == qt::kExitBadInput);
  CHECK(exit_code_of({"--kernel", "awq_nope"}) == qt::kExitBadInput);
  CHECK(exit_code_of({"--points", "bm=48", "--kernel", "awq_gemm"}) == qt::kExitBadInput);
  CHECK(exit_code_of({"--model", "/nonexistent/model.bin"}) == qt::kExitBadInput);
  CHECK(exit_code_of({"--bogus"}) == qt::kExitBadInput);
  CHECK(exit_code_of({"--m", "0"}) == qt::kExitBadInput);
}

TEST_CASE("qtune static on a Q8_0 model says no family serves it and still lists the points") {
  qt::test::TempDir dir("static-ajc1");
  const std::string model = dir.str() + "/tiny.ajc1";
  write_model(model, qt::FileFormat::AJC1);
  const Captured c = run({"--model", model, "--kernel", "awq_dequant", "--cache-dir", dir.str() + "/cache"});
  CHECK(c.rc == 0);
  CHECK(c.out.find("no registered kernel family serves this model") != std::string::npos);
  CHECK(c.out.find("awq_dequant_kernel<256, 2>") != std::string::npos);
  CHECK(c.out.find("waves on") == std::string::npos);
}
