// Malformed Kernel Tuner caches and store exports: one clear error naming the problem, never a crash.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tuner/replay/kt_cache.h"
#include "tuner/store/store.h"

using namespace qt::tune;

namespace {
const char* kGood = R"({"device_name":"GPU","kernel_name":"k","problem_size":[64],
 "tune_params_keys":["bx","flag"],"tune_params":{"bx":[16,32],"flag":[0,1]},"objective":"time",
 "cache":{"16,0":{"bx":16,"flag":0,"time":2.0,"times":[2.0,2.1],"compile_time":100,"benchmark_time":10},
          "32,0":{"bx":32,"flag":0,"time":1.5,"compile_time":100,"benchmark_time":10},
          "32,1":{"bx":32,"flag":1,"time":"CompilationFailedConfig","compile_time":50}}})";
}

TEST_CASE("a well-formed cache parses, and a cache cut short by an interrupted run is repaired", "[tuner][inputs]") {
  RecordedSpace rs = parse_kt_cache(kGood, "good.json");
  REQUIRE(rs.space.size() == 3);
  REQUIRE(rs.optimum_ms == 1.5);
  REQUIRE(rs.points[2].status == Status::CompileFailed);
  std::string cut = kGood;
  cut = cut.substr(0, cut.rfind("\"32,1\"")) ;  // ends with "...}},\n          "
  RecordedSpace rs2 = parse_kt_cache(cut, "cut.json");
  REQUIRE(rs2.space.size() == 2);
}

TEST_CASE("malformed caches fail with a message naming the file and the field", "[tuner][inputs]") {
  auto err = [](const std::string& text) {
    try {
      parse_kt_cache(text, "bad.json");
    } catch (const qt::Error& e) {
      REQUIRE(e.exit_code() == 2);
      return std::string(e.what());
    }
    FAIL("no error for: " << text);
    return std::string();
  };
  REQUIRE_THAT(err("not json"), Catch::Contains("bad.json") && Catch::Contains("not valid JSON"));
  REQUIRE_THAT(err("[1,2]"), Catch::Contains("JSON object"));
  REQUIRE_THAT(err(R"({"tune_params":{},"cache":{}})"), Catch::Contains("tune_params_keys"));
  REQUIRE_THAT(err(R"({"tune_params_keys":["a"],"tune_params":{},"cache":{}})"), Catch::Contains("'a'"));
  REQUIRE_THAT(err(R"({"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"a":2,"time":1}}})"),
               Catch::Contains("a=2"));
  REQUIRE_THAT(err(R"({"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"time":1}}})"),
               Catch::Contains("lacks parameter 'a'"));
  REQUIRE_THAT(err(R"({"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"a":1,"time":-4}}})"),
               Catch::Contains("invalid 'time'"));
  REQUIRE_THAT(err(R"({"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"a":1,"time":"RuntimeFailedConfig"}}})"),
               Catch::Contains("no cache entry has a measured time"));
  REQUIRE_THAT(err(R"({"tune_params_keys":[],"tune_params":{},"cache":{}})"), Catch::Contains("non-empty"));
  REQUIRE_THAT(err(R"({"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":[]})"), Catch::Contains("'cache'"));
}

TEST_CASE("a missing or corrupt gzip file is an error naming it", "[tuner][inputs]") {
  REQUIRE_THROWS_WITH(load_kt_cache("/nonexistent/space.json.gz"), Catch::Contains("/nonexistent/space.json.gz"));
  std::string dir = std::string(QTUNE_BINARY_DIR) + "/test-tmp/tuner";
  std::filesystem::create_directories(dir);
  std::string p = dir + "/corrupt-" + std::to_string(getpid()) + ".json.gz";
  {
    std::ofstream f(p, std::ios::binary);
    f << "\x1f\x8b\x08\x00garbage-that-is-not-deflate";
  }
  REQUIRE_THROWS_AS(load_kt_cache(p), qt::Error);
}

TEST_CASE("malformed store imports are rejected whole, naming the bad result", "[tuner][inputs]") {
  std::string dir = std::string(QTUNE_BINARY_DIR) + "/test-tmp/tuner";
  std::filesystem::create_directories(dir);
  std::string p = dir + "/inputs-" + std::to_string(getpid()) + ".sqlite";
  std::filesystem::remove(p);
  Store st(p);
  nlohmann::json bad = {{"format", "qtune-store"},
                        {"results", {{{"device", {{"name", "x"}}}, {"family", "f"}, {"shape", "oops"},
                                      {"point", nlohmann::json::object()}, {"status", "ok"},
                                      {"created_at", "2026-01-01T00:00:00Z"}}}}};
  REQUIRE_THROWS_WITH(st.import_json(bad), Catch::Contains("result 0"));
  bad["results"][0]["shape"] = {1, 2};
  bad["results"][0]["status"] = "splendid";
  REQUIRE_THROWS_WITH(st.import_json(bad), Catch::Contains("unknown result status 'splendid'"));
  REQUIRE(st.count() == 0);
  REQUIRE_THROWS_WITH(Store("/nonexistent-dir/x.sqlite"), Catch::Contains("/nonexistent-dir/x.sqlite"));
}
