// The qconvert executable: exit codes and one-line errors for bad input, JSON from `info`, and the
// synthetic -> convert path end to end.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/convert/convert_test_support.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Run qconvert(const std::string& args, const fs::path& scratch) {
  const std::string cmd = std::string(QTUNE_BINARY_DIR) + "/bin/qconvert " + args + " > '" + (scratch / "out.txt").string() +
                          "' 2> '" + (scratch / "err.txt").string() + "'";
  Run r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(scratch / "out.txt");
  r.err = slurp(scratch / "err.txt");
  return r;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("qconvert cli: bad input exits 2 with exactly one error line", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-errors");
  qt::test::put_bytes(dir / "garbage.bin", std::string(300, 'x'));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"info " + (dir / "missing.bin").string(), "missing.bin: cannot open"},
      {"info " + (dir / "garbage.bin").string(), "magic"},
      {"info", "missing model file"},
      {"convert --hf " + (dir / "nope").string() + " --format ajc1 --out x.bin", "not a directory"},
      {"convert --hf " + dir.string() + " --format ajc1 --out x.bin --bogus 1", "unknown option '--bogus'"},
      {"convert --hf " + dir.string() + " --format gguf --out x.bin", "gguf"},
      {"convert --hf " + dir.string() + " --format ajc1", "--out"},
      {"synthetic --preset nope --format ajc1 --out x.bin", "unknown preset 'nope'"},
      {"synthetic --preset tiny --format hf --dtype f8 --out x", "--dtype"},
      {"synthetic --preset tiny --format ajc1 --dtype f16 --out x", "--dtype applies only to --format hf"},
      {"synthetic --preset tiny --format hf --shard-size lots --out x", "--shard-size"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"", "missing command"},
  };
  for (const auto& [args, expect] : cases) {
    INFO("qconvert " << args << "\nstderr: " << slurp(dir / "err.txt"));
    const Run r = qconvert(args, dir);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::StartsWith("qconvert: error: ") && Catch::Contains(expect));
    CHECK(r.out.empty());
  }
}

TEST_CASE("qconvert cli: synthetic hf -> convert -> info round trip", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-roundtrip");
  const std::string hf = (dir / "hf").string(), model = (dir / "m.moe3").string();
  Run r = qconvert("synthetic --preset tiny-moe --layers 1 --format hf --dtype bf16 --shard-size 64KB --seed 4 --out " + hf, dir);
  REQUIRE(r.code == 0);
  r = qconvert("convert --hf " + hf + " --format moe3 --expert-type int8-asym --expert-group-size 32 --out " + model, dir);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("peak RSS"));
  r = qconvert("info " + model, dir);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["format"] == "moe3");
  CHECK(j["header"]["n_layers"] == 1);
  CHECK(j["header"]["num_experts"] == 8);
  CHECK(j["tensors"].size() > 20);
  r = qconvert("--help", dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("synthetic"));
}
