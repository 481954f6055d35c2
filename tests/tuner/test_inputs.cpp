// Malformed Kernel Tuner caches and store exports: one clear error naming the problem, never a crash.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tuner/replay/kt_cache.h"
#include "tuner/store/store.h"
#include "tests/tuner/scratch_path.h"

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
  const std::string p = qt::test::tuner_scratch("corrupt", ".json.gz");
  {
    std::ofstream f(p, std::ios::binary);
    f << "\x1f\x8b\x08\x00garbage-that-is-not-deflate";
  }
  REQUIRE_THROWS_AS(load_kt_cache(p), qt::Error);
}

TEST_CASE("malformed store imports are rejected whole, naming the bad result", "[tuner][inputs]") {
  const std::string p = qt::test::tuner_scratch("inputs", ".sqlite");
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

namespace {

std::string with_problem_size(const std::string& ps) {
  std::string text = kGood;
  return text.replace(text.find("[64]"), 4, ps);
}
}  // namespace

TEST_CASE("NaN and Infinity times, as Python's json writes them, make that point a failure", "[tuner][inputs]") {
  std::string text = kGood;
  text.replace(text.find("\"time\":2.0"), 10, "\"time\":NaN");
  text.replace(text.find("[2.0,2.1]"), 9, "[Infinity,-Infinity]");
  RecordedSpace rs = parse_kt_cache(text, "nan.json");
  REQUIRE(rs.space.size() == 3);
  REQUIRE(rs.points[0].status == Status::RuntimeError);
  REQUIRE_THAT(rs.points[0].failure, Catch::Contains("NaN"));
  REQUIRE(rs.points[1].status == Status::Ok);
  // Only a repetition non-finite: the point is a failure too, its samples are not kept.
  std::string rep = kGood;
  rep.replace(rep.find("[2.0,2.1]"), 9, "[2.0,NaN]");
  RecordedSpace rs2 = parse_kt_cache(rep, "rep.json");
  REQUIRE(rs2.points[0].status == Status::RuntimeError);
  REQUIRE(rs2.points[0].times_ms.empty());
  // A string that merely contains the word is not touched.
  std::string str = kGood;
  str.replace(str.find("\"GPU\""), 5, "\"NaN GPU\"");
  REQUIRE(parse_kt_cache(str, "s.json").device_name == "NaN GPU");
  std::string bad_sample = kGood;
  bad_sample.replace(bad_sample.find("[2.0,2.1]"), 9, "[2.0,\"x\"]");
  REQUIRE_THROWS_WITH(parse_kt_cache(bad_sample, "t.json"), Catch::Contains("'times' holds \"x\""));
}

TEST_CASE("problem_size must hold sizes in 0..2^53, never wrapped into negative integers", "[tuner][inputs]") {
  REQUIRE(parse_kt_cache(with_problem_size("[4096, 4096.0, 1]"), "ok.json").problem_shape ==
          std::vector<int64_t>{4096, 4096, 1});
  REQUIRE(parse_kt_cache(with_problem_size("77"), "ok.json").problem_shape == std::vector<int64_t>{77});
  for (const char* bad : {"[1e30]", "[-5]", "[4096.5]", "[\"x\"]", "[18446744073709551615]", "[9007199254740993]",
                          "[NaN]", "[Infinity]"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(parse_kt_cache(with_problem_size(bad), "ps.json"),
                        Catch::Contains("ps.json") && Catch::Contains("problem_size"));
  }
}

TEST_CASE("a gzip file that expands past the cap is refused without reading it all", "[tuner][inputs]") {
  std::string p = qt::test::tuner_scratch("bomb", ".json.gz");
  gzFile f = gzopen(p.c_str(), "wb9");
  REQUIRE(f != nullptr);
  std::string zeros(1 << 20, '0');
  for (int i = 0; i < 4; ++i) REQUIRE(gzwrite(f, zeros.data(), unsigned(zeros.size())) == int(zeros.size()));
  gzclose(f);
  REQUIRE(std::filesystem::file_size(p) < 64 * 1024);  // 4 MiB of zeros compress to a few KiB
  REQUIRE_THROWS_WITH(read_maybe_gzip(p, 1 << 20), Catch::Contains(p) && Catch::Contains("uncompressed"));
  REQUIRE(read_maybe_gzip(p, 8 << 20).size() == 4u << 20);
  REQUIRE(kMaxCacheBytes <= (size_t(1) << 30));
}

TEST_CASE("importing the same Kernel Tuner cache twice, under any name, adds its rows once", "[tuner][inputs]") {
  const std::string a = qt::test::tuner_scratch("kt-a", ".json"), b = qt::test::tuner_scratch("kt-b", ".json"),
                    db = qt::test::tuner_scratch("kt-store", ".sqlite");
  for (const auto& path : {a, b}) {
    std::ofstream f(path);
    f << kGood;
  }
  std::filesystem::remove(db);
  Store st(db);
  REQUIRE(st.import_kt_cache(a) == 3);
  REQUIRE(st.import_kt_cache(a) == 0);
  REQUIRE(st.import_kt_cache(b) == 0);
  REQUIRE(st.count() == 3);
  REQUIRE(st.rows()[0].shape == std::vector<int64_t>{64});
}
