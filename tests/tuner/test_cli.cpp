// The qtune command line: replay JSON shape, errors on bad input, the cpu tuning loop into a store.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tuner/search/strategies.h"
#include "tests/tuner/run_qtune.h"
#include "tests/tuner/scratch_path.h"
#include "common/paths.h"

using nlohmann::json;

namespace {
using Run = qt::test::QtuneRun;
Run run(const std::string& args) { return qt::test::run_qtune(args); }
const std::string kSlice = qt::source_root() + "/tests/tuner/data/convolution_A4000_slice.json.gz";
}  // namespace

TEST_CASE("qtune replay --json prints one object with the documented fields", "[tuner][cli]") {
  Run r = run("replay --space " + kSlice + " --strategy best --budget 5% --seeds 7 --json");
  REQUIRE(r.rc == 0);
  json j = json::parse(r.out);
  REQUIRE(j["strategy"] == qt::tune::default_strategy_name());  // "best" resolved to what it stands for
  REQUIRE(j["space_size"] == 400);
  REQUIRE(j["budget_evals"] == 20);
  REQUIRE(j["seeds"] == 7);
  double f = j["median_fraction_of_optimum"];
  REQUIRE(f > 0);
  REQUIRE(f <= 1);
  REQUIRE(j["curve"].is_array());
  REQUIRE(j["curve"].back()[0] == 20);
  REQUIRE(j["curve"].back()[1] == f);
  REQUIRE(j["random"]["curve"].size() == j["curve"].size());
  REQUIRE(j["random"].contains("median_fraction_of_optimum"));
}

TEST_CASE("qtune replay --leave-one-out scores, for each space, the strategy chosen on the others", "[tuner][cli]") {
  Run r = run("replay --space " + kSlice + "," + kSlice + " --leave-one-out --strategies random,forest --budget 5%,10% "
              "--seeds 5 --json");
  REQUIRE(r.rc == 0);
  json j = json::parse(r.out);
  REQUIRE(j["spaces"].size() == 2);
  REQUIRE(j["budgets"] == json({"5%", "10%"}));
  for (const auto& s : j["spaces"]) {
    const std::string chosen = s["chosen_on_others"];
    REQUIRE((chosen == "random" || chosen == "forest"));
    for (const char* strat : {"random", "forest"})
      for (const char* b : {"5%", "10%"}) {
        const auto& cell = s["results"][strat][b];
        REQUIRE(cell["p10_fraction_of_optimum"] <= cell["p25_fraction_of_optimum"]);
        REQUIRE(cell["p25_fraction_of_optimum"] <= cell["median_fraction_of_optimum"]);
      }
    REQUIRE(s["results"]["forest"]["10%"]["budget_evals"] == 40);
  }
  Run one = run("replay --space " + kSlice + "," + kSlice + " --seeds 2");
  REQUIRE(one.rc == 2);
  REQUIRE(one.out.find("--leave-one-out") != std::string::npos);
  Run bad = run("replay --space " + kSlice + "," + kSlice + " --leave-one-out --strategies best");
  REQUIRE(bad.rc == 2);
}

TEST_CASE("qtune replay --transfer reports what copying another recording's winner gives", "[tuner][cli]") {
  Run r = run("replay --space " + kSlice + " --transfer " + kSlice + " --strategy forest --budget 2 --seeds 3 --json");
  REQUIRE(r.rc == 0);
  json j = json::parse(r.out);
  REQUIRE(j["copied_winner_fraction"] == 1.0);  // its own recording as the source
  REQUIRE(j["median_fraction_of_optimum"] == 1.0);
}

TEST_CASE("qtune rejects bad input with one line and exit code 2", "[tuner][cli]") {
  Run missing = run("replay --space /nonexistent.json.gz --json");
  REQUIRE(missing.rc == 2);
  REQUIRE(missing.out.find("/nonexistent.json.gz") != std::string::npos);
  Run strat = run("replay --space " + kSlice + " --strategy nope");
  REQUIRE(strat.rc == 2);
  REQUIRE(strat.out.find("unknown strategy 'nope'") != std::string::npos);
  Run budget = run("replay --space " + kSlice + " --budget 0%");
  REQUIRE(budget.rc == 2);
  Run empty_item = run("replay --space " + kSlice + " --budget 10,,20");  // as --buckets 1,,2 is refused
  REQUIRE(empty_item.rc == 2);
  REQUIRE(empty_item.out.find("--budget: empty item in list '10,,20'") != std::string::npos);
  Run dev = run("--device quantum --shape 8,64,64");
  REQUIRE(dev.rc == 2);
  REQUIRE(std::count(dev.out.begin(), dev.out.end(), '\n') == 1);
}

TEST_CASE("qtune --gpu takes only an architecture this build knows, as qtune static does, before any work",
          "[tuner][cli]") {
  const std::string model = qt::source_root() + "/tests/golden/files/dense.ajc1";
  const std::string store = qt::test::tuner_scratch("sm99", ".sqlite");
  std::remove(store.c_str());
  for (const char* arch : {"sm99", "sm_42", "banana"}) {
    INFO(arch);
    Run r = run("--quiet --device emu --model " + model + " --gpu " + arch + " --families rmsnorm --budget 1 --cache " + store);
    CHECK(r.rc == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find("--gpu: ") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(store));
  }
  Run upper = run("--device emu --model " + model + " --gpu SM86 --families rmsnorm --dry-run");
  CHECK(upper.rc == 0);  // the case of "sm" does not matter
}

TEST_CASE("qtune static --step runs on a small preset with its own AWQ group, and --fingerprint-store names a store "
          "that has no GPU", "[tuner][cli]") {
  // The tiny preset's dims are 64: qconvert writes its AWQ projections with group 64, not 128.
  Run tiny = run("static --step decode --preset tiny");
  INFO(tiny.out);
  CHECK(tiny.rc == 0);
  CHECK(tiny.out.find("step: default") != std::string::npos);
  const std::string cpu_store = qt::test::tuner_scratch("cpu-only", ".sqlite");
  std::remove(cpu_store.c_str());
  REQUIRE(run("--device cpu --model " + qt::source_root() + "/tests/golden/files/dense.ajc1 --cache " + cpu_store +
              " --budget 1 --min-time 0 --min-reps 1 --quiet").rc == 0);
  Run cpu = run("static --step decode --preset tiny --fingerprint-store " + cpu_store);
  CHECK(cpu.rc == 2);
  CHECK(cpu.out.find(cpu_store + ": the store names no GPU") != std::string::npos);
  const std::string junk = qt::test::tuner_scratch("junk-store", ".sqlite");
  { std::ofstream(junk) << std::string(4096, 'x'); }
  Run bad = run("static --step decode --preset tiny --fingerprint-store " + junk);
  CHECK(bad.rc == 2);
  CHECK(bad.out.find(junk + ": not a readable SQLite tuning store") != std::string::npos);
}

TEST_CASE("qtune --device cpu tunes a shape into the store and lookup finds the winner", "[tuner][cli]") {
  const std::string db = qt::test::tuner_scratch("cli", ".sqlite");
  Run t = run("--device cpu --shape 128,256,64 --type q8_0 --budget 5 --min-time 0.001 --quiet --cache " + db);
  REQUIRE(t.rc == 0);
  REQUIRE(t.out.find("summary: 5 candidates") != std::string::npos);
  Run check = run("store check --cache " + db);
  REQUIRE(check.rc == 0);
  REQUIRE(check.out.find("5 results, 0 dispatch entries, 1 devices, integrity ok, 0 bad rows") != std::string::npos);
  Run exp = run("store export --cache " + db);
  REQUIRE(exp.rc == 0);
  json j = json::parse(exp.out);
  REQUIRE(j["results"].size() == 5);
  std::string dev = j["results"][0]["device"]["name"];
  Run look = run("store lookup --cache " + db + " --device-name '" + dev +
                 "' --family cpu.matvec.q8_0 --dtypes 'q8_0xf32->f32' --shape 128,256,64");
  REQUIRE(look.rc == 0);
  json w = json::parse(look.out);
  REQUIRE(w["found"] == true);
  REQUIRE(w["exact"] == true);
}

TEST_CASE("qtune store check reports results measured on other kernel sources as stale", "[tuner][cli]") {
  const std::string db = qt::test::tuner_scratch("stale", ".sqlite");
  Run t = run("--device cpu --shape 128,256,64 --type q8_0 --budget 2 --min-time 0.001 --quiet --cache " + db);
  REQUIRE(t.rc == 0);
  Run fresh = run("store check --cache " + db);
  REQUIRE(fresh.rc == 0);
  REQUIRE(fresh.out.find("stale:") == std::string::npos);
  // The same rows as if an older build had measured them.
  Run exp = run("store export --cache " + db);
  REQUIRE(exp.rc == 0);
  json j = json::parse(exp.out);
  for (auto& r : j["results"]) r["source_hash"] = "0123456789abcdef-older";
  const std::string old_json = qt::test::tuner_scratch("stale", ".json");
  {
    FILE* f = std::fopen(old_json.c_str(), "w");
    REQUIRE(f);
    std::fputs(j.dump().c_str(), f);
    std::fclose(f);
  }
  REQUIRE(run("store import --cache " + db + " " + old_json).rc == 0);
  Run check = run("store check --cache " + db);
  REQUIRE(check.rc == 0);
  REQUIRE(check.out.find("stale: cpu.matvec.q8_0: 2 results for ") != std::string::npos);
  REQUIRE(check.out.find("measured on sources 0123456789ab, not this build's") != std::string::npos);
}

TEST_CASE("qtune refuses a shape its family cannot run and out-of-range flags before tuning, writing nothing",
          "[tuner][cli]") {
  const std::string db = qt::test::tuner_scratch("cli-refuse", ".sqlite");
  Run group = run("--device cpu --shape 64,64,7 --type q8_0 --budget 2 --quiet --cache " + db);
  REQUIRE(group.rc == 2);
  REQUIRE(group.out.find("64x64x7") != std::string::npos);
  for (const char* flags : {"--min-time -1", "--min-reps 4294967297", "--seed -1", "--budget 0"}) {
    Run r = run(std::string("--device cpu --shape 64,64,32 --type q8_0 --quiet ") + flags + " --cache " + db);
    INFO(flags << ": " << r.out);
    REQUIRE(r.rc == 2);
  }
  Run check = run("store check --cache " + db);
  REQUIRE(check.out.find(" 0 results") != std::string::npos);
}

TEST_CASE("qtune checks a mistyped --families name and an unwritable --json path before any work, in one line",
          "[tuner][cli]") {
  const std::string model = qt::source_root() + "/tests/golden/files/dense.ajc1";
  Run fam = run("--device emu --model " + model + " --gpu sm86 --families rmsnorm,bogus --dry-run");
  CHECK(fam.rc == 2);
  CHECK(std::count(fam.out.begin(), fam.out.end(), '\n') == 1);  // no plan printed before the error
  CHECK(fam.out.find("--families: unknown kernel family 'bogus'") != std::string::npos);
  CHECK(run("--device emu --model " + model + " --gpu sm86 --families rmsnorm,cublaslt_f16 --dry-run").rc == 0);
  for (const std::string cmd : {"static --kernel rmsnorm --json /nonexistent/x.json",
                                "static --step decode --preset tiny --json /nonexistent/x.json"}) {
    INFO(cmd);
    Run r = run(cmd);
    CHECK(r.rc == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find("--json /nonexistent/x.json: its folder /nonexistent does not exist") != std::string::npos);
  }
}

TEST_CASE("qtune static --step refuses a step qrun would not run: past the model's context, fused norms on a "
          "prefill or without the frag layout", "[tuner][cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--step decode --preset qwen3-8b --context 1000000", "exceeds the model's maximum of 40960 tokens"},
      {"--step prefill --preset qwen3-8b --prompt 50000", "--prompt 50000 exceeds the model's maximum"},
      {"--step decode --preset qwen3-8b --fuse-norm --weight-layout file", "cannot be given with --weight-layout file"},
      {"--step decode --preset qwen3-8b --fuse-norm --predequantize", "cannot be given with --predequantize"},
      {"--step prefill --preset qwen3-8b --fuse-norm", "--fuse-norm fuses a decode step's norms"}};
  for (const auto& [args, needle] : cases) {
    INFO(args);
    Run r = run("static --gpu sm90 " + args);
    CHECK(r.rc == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find(needle) != std::string::npos);
  }
  CHECK(run("static --gpu sm90 --step decode --preset qwen3-8b --context 40959 --fuse-norm").rc == 0);
}

TEST_CASE("qtune never writes its output over an input: static --json onto the model, store export --out onto "
          "the store", "[tuner][cli]") {
  const std::string model = qt::test::tuner_scratch("json-target", ".ak48");
  std::filesystem::copy_file(qt::source_root() + "/tests/golden/files/dense.ak48", model,
                             std::filesystem::copy_options::overwrite_existing);
  const auto size = std::filesystem::file_size(model);
  Run json = run("static --gpu sm80 --step decode --model " + model + " --json " + model);
  CHECK(json.rc == 2);
  CHECK(json.out.find("--json " + model + " is the input " + model) != std::string::npos);
  CHECK(std::filesystem::file_size(model) == size);
  const std::string store = qt::test::tuner_scratch("export-target", ".sqlite");
  std::remove(store.c_str());
  REQUIRE(run("--device cpu --model " + qt::source_root() + "/tests/golden/files/dense.ajc1 --cache " + store +
              " --budget 1 --min-time 0 --min-reps 1 --quiet").rc == 0);
  Run exp = run("store export --cache " + store + " --out " + store);
  CHECK(exp.rc == 2);
  CHECK(exp.out.find("is the input") != std::string::npos);
  CHECK(run("store check --cache " + store).rc == 0);  // still a store
}

TEST_CASE("qtune store import refuses a ranking that names a contender twice or a decode ranking that is no decode "
          "ranking", "[tuner][cli]") {
  const nlohmann::json device = {{"arch", "sm_80"}, {"name", "emu"}, {"qtune_version", "0.1.0"}};
  auto import_one = [&](const nlohmann::json& row) {
    const std::string file = qt::test::tuner_scratch("import-ranking", ".json");
    const std::string store = qt::test::tuner_scratch("import-ranking", ".sqlite");
    std::remove(store.c_str());
    std::ofstream(file) << nlohmann::json{{"format", "qtune-store"}, {"version", 2}, {"results", nlohmann::json::array()},
                                          {"dispatch", {row}}}.dump();
    return run("store import " + file + " --cache " + store);
  };
  const nlohmann::json ok = {{"device", device}, {"op", "decode.step"}, {"weight_type", "AWQ_INT4"},
                             {"shape", {3, 96, 4, 2, 40, 160, 0, 0, 384}}, {"bucket", 1},
                             {"ranking", {{{"family", "emu.decode.plain"}, {"median_s", 0.001}},
                                          {{"family", "emu.decode.fused-norm"}, {"median_s", 0.002}}}}};
  CHECK(import_one(ok).rc == 0);
  nlohmann::json twice = ok;
  twice["ranking"][1]["family"] = "emu.decode.plain";
  Run r = import_one(twice);
  CHECK(r.rc == 2);
  CHECK(r.out.find("ranking names 'emu.decode.plain' twice") != std::string::npos);
  nlohmann::json bogus = ok;
  bogus["ranking"][1]["family"] = "emu.decode.bogus";
  r = import_one(bogus);
  CHECK(r.rc == 2);
  CHECK(r.out.find("'emu.decode.bogus' is no decode variant") != std::string::npos);
  nlohmann::json wide = ok;
  wide["shape"] = std::vector<int64_t>(1000, 1);
  r = import_one(wide);
  CHECK(r.rc == 2);
  CHECK(r.out.find("a decode.step shape has 9 dims, not 1000") != std::string::npos);
}
