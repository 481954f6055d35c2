// qconvert against the golden data of tests/golden (scripts/golden/make_goldens.py): converting the tiny
// transformers checkpoints must reproduce, byte for byte, the model files written by the independent Python
// writer of the qwen3.c layouts.
#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/convert/converter.h"
#include "models/formats/model_file.h"
#include "tests/convert/convert_test_support.h"
#include "common/paths.h"

using namespace qt;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(qt::source_root()) / "tests" / "golden";

// The manifest records, for each model file, the qconvert command that must reproduce it, e.g.
// "qconvert convert --no-tokenizer --out FILE --hf tests/golden/models/moe-norm --format moe3 --expert-type awq
// --expert-group-size 32". The test runs exactly that conversion through the library.
convert::ConvertOptions options_from(const std::string& command, const std::string& out) {
  std::istringstream in(command);
  std::vector<std::string> words{std::istream_iterator<std::string>(in), {}};
  REQUIRE(words.size() >= 2);
  REQUIRE(words[0] == "qconvert");
  REQUIRE(words[1] == "convert");
  convert::ConvertOptions o;
  o.out_path = out;
  o.quiet = true;
  o.copy_tokenizer = false;
  for (size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--no-tokenizer") continue;
    REQUIRE(i + 1 < words.size());
    const std::string& v = words[++i];
    if (w == "--out") continue;
    if (w == "--hf") o.hf_dir = (fs::path(qt::source_root()) / v).string();
    else if (w == "--format") o.format = parse_file_format(v);
    else if (w == "--expert-type") o.expert_type = convert::parse_expert_type(v);
    else if (w == "--expert-group-size") o.expert_group_size = std::stoi(v);
    else if (w == "--group-size") o.group_size = std::stoi(v);
    else FAIL("unexpected flag in the manifest's command: " << w);
  }
  return o;
}

}  // namespace

TEST_CASE("golden: qconvert of the transformers checkpoints equals the Python-written model files", "[golden]") {
  // The goldens are committed; a missing manifest must fail, not pass without comparing anything.
  REQUIRE(fs::exists(kGolden / "manifest.json"));
  std::ifstream in(kGolden / "manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  REQUIRE(manifest["files"].size() >= 4);
  const auto scratch = qt::test::convert_scratch("golden");
  for (const auto& f : manifest["files"]) {
    const std::string file = f["file"].get<std::string>();
    const std::string command = f["equivalent_to"].get<std::string>();
    INFO(file << " <- " << command);
    const convert::ConvertOptions o = options_from(command, (scratch / fs::path(file).filename()).string());
    const auto r = convert::convert_checkpoint(o);
    if (o.hf_dir.find("awq") != std::string::npos) CHECK(r.awq_passthrough > 0);
    const auto ours = qt::test::file_bytes(o.out_path);
    const auto theirs = qt::test::file_bytes(kGolden / file);
    CHECK(theirs.size() == f["bytes"].get<size_t>());
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
  const auto scratch = qt::test::convert_scratch("golden-float-ak48");
  for (const char* m : {"dense", "dense-tied"}) {
    INFO(m);
    const fs::path golden = kGolden / "files" / (std::string(m) + ".ak48");
    REQUIRE(fs::exists(golden));
    convert::ConvertOptions o;
    o.hf_dir = (kGolden / "models" / m).string();
    o.out_path = (scratch / "m.ak48").string();
    o.format = FileFormat::AK48;
    o.group_size = 32;
    o.quiet = true;
    convert::convert_checkpoint(o);
    CHECK(qt::test::file_bytes(o.out_path) == qt::test::file_bytes(golden));
  }
}
