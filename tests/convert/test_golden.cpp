// qconvert against the golden data of tests/golden (scripts/golden/make_goldens.py): converting the tiny
// transformers checkpoints must reproduce, byte for byte, the model files written by the independent Python
// writer of the qwen3.c layouts.
#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "models/convert/converter.h"
#include "models/formats/model_file.h"
#include "tests/convert/convert_test_support.h"

using namespace qt;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(QTUNE_SOURCE_DIR) / "tests" / "golden";

struct GoldenCase {
  std::string model_dir;  // under tests/golden/models
  FileFormat format;
  std::optional<WeightType> experts;
  int32_t expert_group = 0;
  std::string file;  // under tests/golden/files
};

// The conversions the manifest's `equivalent_to` fields describe.
std::vector<GoldenCase> cases() {
  std::vector<GoldenCase> c = {
      {"dense", FileFormat::AJC1, {}, 0, "dense.ajc1"},
      {"dense-tied", FileFormat::AJC1, {}, 0, "dense-tied.ajc1"},
      {"dense-awq", FileFormat::AK48, {}, 0, "dense.ak48"},
      {"dense-tied-awq", FileFormat::AK48, {}, 0, "dense-tied.ak48"},
  };
  for (const char* m : {"moe-norm", "moe-nonorm"}) {
    c.push_back({m, FileFormat::MOE3, WeightType::Q8_0, 0, std::string(m) + ".q8_0.moe3"});
    c.push_back({m, FileFormat::MOE3, WeightType::INT8_GW_SYM, 32, std::string(m) + ".int8-sym.moe3"});
    c.push_back({m, FileFormat::MOE3, WeightType::INT8_GW_ASYM, 32, std::string(m) + ".int8-asym.moe3"});
    c.push_back({m, FileFormat::MOE3, WeightType::AWQ_INT4, 32, std::string(m) + ".awq.moe3"});
  }
  return c;
}

}  // namespace

TEST_CASE("golden: qconvert of the transformers checkpoints equals the Python-written model files", "[golden]") {
  if (!fs::exists(kGolden / "manifest.json")) {
    WARN("tests/golden/manifest.json not present; golden comparison skipped");
    return;
  }
  std::ifstream in(kGolden / "manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  std::set<std::string> listed;
  for (const auto& f : manifest["files"]) listed.insert(f["file"].get<std::string>());

  const auto scratch = qt::test::convert_scratch("golden");
  for (const GoldenCase& g : cases()) {
    INFO(g.model_dir << " -> " << g.file);
    CHECK(listed.count("files/" + g.file) == 1);
    convert::ConvertOptions o;
    o.hf_dir = (kGolden / "models" / g.model_dir).string();
    o.out_path = (scratch / g.file).string();
    o.format = g.format;
    o.expert_type = g.experts;
    o.expert_group_size = g.expert_group;
    o.quiet = true;
    const auto r = convert::convert_checkpoint(o);
    if (g.model_dir.find("awq") != std::string::npos) CHECK(r.awq_passthrough > 0);
    const auto ours = qt::test::file_bytes(o.out_path);
    const auto theirs = qt::test::file_bytes(kGolden / "files" / g.file);
    REQUIRE(ours.size() == theirs.size());
    size_t first_diff = ours.size();
    for (size_t i = 0; i < ours.size(); ++i)
      if (ours[i] != theirs[i]) {
        first_diff = i;
        break;
      }
    INFO("first differing byte at offset " << first_diff);
    CHECK(first_diff == ours.size());
  }
}

TEST_CASE("golden: the float checkpoint quantized to ak48 equals the AutoAWQ checkpoint's conversion", "[golden]") {
  if (!fs::exists(kGolden / "models" / "dense" / "config.json")) return;
  const auto scratch = qt::test::convert_scratch("golden-float-ak48");
  for (const char* m : {"dense", "dense-tied"}) {
    INFO(m);
    convert::ConvertOptions o;
    o.hf_dir = (kGolden / "models" / m).string();
    o.out_path = (scratch / "m.ak48").string();
    o.format = FileFormat::AK48;
    o.group_size = 32;
    o.quiet = true;
    convert::convert_checkpoint(o);
    CHECK(qt::test::file_bytes(o.out_path) == qt::test::file_bytes(kGolden / "files" / (std::string(m) + ".ak48")));
  }
}
