// The runtime against the transformers goldens (tests/golden): each Python-written model file of every
// scheme, both precisions. Reference path: |logit - golden| <= 1e-3 (manifest "tolerance"). Fast path (int8
// activations): the same top-1 token on >= 98% of positions and |logit - golden| <= kFastTolerance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/formats/model_file.h"
#include "runtime/cpu/amx_support.h"
#include "runtime/cpu/amx_tile_model.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/model/qwen3_model.h"
#include "tests/runtime/random_model.h"
#include "common/paths.h"
#include "tests/skip.h"

using namespace qt;
using namespace qt::rt;

namespace {

// Documented fast-path tolerance on the golden models (logit std about 2.5): int8 activations per weight
// group cost at most this much (measured worst case 0.24, see results/cpu-runtime-benchmark.md).
constexpr float kFastTolerance = 0.3f;

const std::string kGolden = qt::source_root() + "/tests/golden/";

nlohmann::json manifest() {
  std::ifstream in(kGolden + "manifest.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<float> read_f32(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<float> v(count);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * sizeof(float)));
  REQUIRE(in.gcount() == std::streamsize(count * sizeof(float)));
  return v;
}

struct GoldenRun {
  float max_diff = 0;
  int positions = 0, top1_same = 0;
};

// The logits of every position of each of the file's sequences (each a prompt from an empty cache).
std::vector<std::vector<float>> run_sequences(const nlohmann::json& m, const nlohmann::json& file,
                                              const CpuOptions& options) {
  const auto mf = ModelFile::open(kGolden + file["file"].get<std::string>());
  CpuBackend be(options);
  std::vector<std::vector<float>> out;
  for (const auto& seq : m["models"][file["model"].get<std::string>()]["sequences"]) {
    Qwen3Model model(mf->weights(), be, 64);
    out.push_back(model.forward(seq.get<std::vector<int32_t>>(), LogitsRows::kAll));
  }
  return out;
}

GoldenRun run_file(const nlohmann::json& m, const nlohmann::json& file, bool reference) {
  const auto& model_entry = m["models"][file["model"].get<std::string>()];
  const auto& scheme = model_entry["schemes"][file["scheme"].get<std::string>()];
  const std::vector<std::vector<float>> logits = run_sequences(m, file, test::cpu_options(reference, 2));
  GoldenRun r;
  const auto& seqs = model_entry["sequences"];
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& lg = scheme["logits"][i];
    const int64_t T = lg["shape"][0], V = lg["shape"][1];
    REQUIRE(int64_t(seqs[i].size()) == T);
    const std::vector<float> expect = read_f32(kGolden + lg["file"].get<std::string>(), size_t(T * V));
    const std::vector<float>& got = logits[i];
    REQUIRE(int64_t(got.size()) == T * V);
    for (int64_t t = 0; t < T; ++t) {
      const float* g = got.data() + t * V;
      for (int64_t v = 0; v < V; ++v) r.max_diff = std::max(r.max_diff, std::fabs(g[v] - expect[size_t(t * V + v)]));
      r.top1_same += (std::max_element(g, g + V) - g) == lg["top1"][size_t(t)].get<int64_t>();
      ++r.positions;
    }
  }
  return r;
}

}  // namespace

TEST_CASE("reference path matches transformers within 1e-3 on every golden file", "[runtime][golden]") {
  const nlohmann::json m = manifest();
  const float tol = m["tolerance"]["reference_abs"].get<float>();
  REQUIRE(m["files"].size() >= 9);
  for (const auto& file : m["files"]) {
    INFO(file["file"].get<std::string>() << " (" << file["scheme"].get<std::string>() << ")");
    const GoldenRun r = run_file(m, file, true);
    CHECK(r.max_diff <= tol);
    CHECK(r.top1_same == r.positions);
  }
}

TEST_CASE("fast path stays within its tolerance and agrees on top-1 for >= 98% of golden positions",
          "[runtime][golden]") {
  const nlohmann::json m = manifest();
  int positions = 0, same = 0;
  for (const auto& file : m["files"]) {
    INFO(file["file"].get<std::string>() << " (" << file["scheme"].get<std::string>() << ")");
    const GoldenRun r = run_file(m, file, false);
    WARN(file["file"].get<std::string>() << ": fast path max |logit diff| " << r.max_diff << ", top-1 "
                                         << r.top1_same << "/" << r.positions);
    CHECK(r.max_diff <= kFastTolerance);
    positions += r.positions;
    same += r.top1_same;
  }
  INFO("top-1 agreement " << same << "/" << positions);
  CHECK(same * 100 >= positions * 98);
  WARN("fast path top-1 agreement " << same << "/" << positions);
}

// Whole models, so the AMX kernel meets every matmul of a forward pass (fused launches, MoE experts grouped, two
// threads). The prompts of 7, 13 and 24 tokens take VNNI only, one partial tile block, and a whole block then a
// partial one; the experts' shares of them, all of these.
static void check_tiles_give_vnni_logits(TileUnit tiles) {
  const nlohmann::json m = manifest();
  CpuOptions vnni = test::cpu_options(false, 2, Isa::kAvx512Vnni), amx = vnni;
  vnni.tiles = TileUnit::kNone;
  amx.tiles = tiles;
  for (const auto& file : m["files"]) {
    INFO(file["file"].get<std::string>() << " (" << file["scheme"].get<std::string>() << "), "
                                         << tile_unit_name(tiles));
    CHECK(run_sequences(m, file, amx) == run_sequences(m, file, vnni));
  }
}

TEST_CASE("the AMX path through the tile model gives the VNNI path's logits bit for bit on every golden file",
          "[runtime][golden][amx]") {
  if (!isa_supported(Isa::kAvx512Vnni))
    QTUNE_SKIP("the AMX kernel converts its sums with AVX-512, which this CPU lacks");
  const uint64_t before = AmxTileModel::products_run();
  check_tiles_give_vnni_logits(TileUnit::kAmxModel);
  CHECK(AmxTileModel::products_run() > before);
}

TEST_CASE("on AMX hardware the AMX path gives the VNNI path's logits bit for bit on every golden file",
          "[runtime][golden][amx]") {
  if (!amx_support().usable) QTUNE_SKIP("no AMX tiles here: " + amx_support().detail);
  check_tiles_give_vnni_logits(TileUnit::kAmx);
}

// The AVX-VNNI path differs from the AVX2 one only in its Q8_0 GEMM (isa_kernels.h), whose integer sums are exact
// and whose float steps are the same, so every logit must be the same bits, on every matrix shape of the goldens.
// (One token at a time is held to the exact sums by test_cpu_fast_paths, on every ISA.)
TEST_CASE("the AVX-VNNI path gives the AVX2 path's logits bit for bit on every golden file", "[runtime][golden]") {
  if (!isa_supported(Isa::kAvxVnni)) QTUNE_SKIP("this CPU has no AVX-VNNI (cpuid leaf 7 sub-leaf 1, EAX bit 4)");
  const nlohmann::json m = manifest();
  for (const auto& file : m["files"]) {
    INFO(file["file"].get<std::string>() << " (" << file["scheme"].get<std::string>() << ")");
    CHECK(run_sequences(m, file, test::cpu_options(false, 2, Isa::kAvxVnni)) ==
          run_sequences(m, file, test::cpu_options(false, 2, Isa::kAvx2)));
  }
}
