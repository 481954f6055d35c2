#include <catch2/catch.hpp>

#include "common/cli_args.h"
#include "common/error.h"

using namespace qt;

static CliArgs make_parser() {
  CliArgs a("tool", "test tool");
  a.option("-n,--count", "N", "how many", "4").option("--name", "S", "a name").flag("-v,--verbose", "chatty");
  return a;
}

TEST_CASE("cli: values, defaults, flags and positionals are parsed", "[cli]") {
  auto a = make_parser();
  a.positionals("FILE", "input", 2);
  REQUIRE(a.parse({"-n", "7", "--name=abc", "-v", "in.bin"}));
  CHECK(a.get_int("--count") == 7);
  CHECK(a.get("--name") == "abc");
  CHECK(a.get_flag("--verbose"));
  REQUIRE(a.positional().size() == 1);
  CHECK(a.positional()[0] == "in.bin");
  auto b = make_parser();
  REQUIRE(b.parse(std::vector<std::string>{}));
  CHECK(b.get_int("--count") == 4);
  CHECK_FALSE(b.given("--count"));
  CHECK_FALSE(b.get_optional("--name").has_value());
}

TEST_CASE("cli: unknown flags, missing values and bad numbers are errors naming the flag", "[cli]") {
  auto a = make_parser();
  CHECK_THROWS_WITH(a.parse({"--bogus"}), Catch::Contains("--bogus"));
  auto b = make_parser();
  CHECK_THROWS_WITH(b.parse({"--name"}), Catch::Contains("--name"));
  auto c = make_parser();
  c.parse({"-n", "7x"});
  CHECK_THROWS_WITH(c.get_int("--count"), Catch::Contains("7x"));
  auto d = make_parser();
  CHECK_THROWS_WITH(d.parse({"extra"}), Catch::Contains("extra"));
  CHECK_THROWS_AS(parse_int_list("1,,2", "--ids"), Error);
  CHECK(parse_int_list("1,2,3", "--ids") == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("cli: negative numbers are values, not flags", "[cli]") {
  auto a = make_parser();
  REQUIRE(a.parse({"-n", "-3"}));
  CHECK(a.get_int("--count") == -3);
}

TEST_CASE("cli: integer flags are range-checked at the full width of their type, never cut", "[cli]") {
  auto parsed = [](const std::string& v) {
    auto a = make_parser();
    a.parse({"-n", v});
    return a;
  };
  CHECK_THROWS_WITH(parsed("4294967297").get_int_as<int32_t>("--count"),
                    Catch::Contains("--count") && Catch::Contains("4294967297") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(parsed("2147483648").get_int_as<int>("--count"), Catch::Contains("out of range"));
  CHECK(parsed("2147483647").get_int_as<int>("--count") == 2147483647);
  CHECK(parsed("-2147483648").get_int_as<int32_t>("--count") == INT32_MIN);
  CHECK_THROWS_WITH(parsed("-1").get_int_as<uint64_t>("--count"), Catch::Contains("non-negative"));
  CHECK(parsed("18446744073709551615").get_int_as<uint64_t>("--count") == UINT64_MAX);
  CHECK_THROWS_WITH(parsed("18446744073709551616").get_int_as<uint64_t>("--count"), Catch::Contains("--count"));
  CHECK_THROWS_WITH(parsed("4294967296").get_int_as<uint32_t>("--count"), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(parsed("99999999999999999999").get_int_as<int64_t>("--count"), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(parsed("12x").get_int_as<int32_t>("--count"), Catch::Contains("12x"));
  CHECK_THROWS_WITH(parsed("99999999999999999999").get_int("--count"), Catch::Contains("--count"));
}

TEST_CASE("cli: a declared range is checked when the command line is parsed, before any value is read", "[cli]") {
  auto make = [] {
    CliArgs a("tool", "test tool");
    a.option("--threads", "N", "threads").range(IntRange{1, 1024})
        .option("--seed", "S", "seed", "1").range(UintRange{0, UINT64_MAX})
        .option("--top-p", "P", "mass").range(RealRange{0, 1, true})
        .option("--buckets", "LIST", "rows").list_range(IntRange{1, 65536});
    return a;
  };
  for (const char* bad : {"0", "-1", "1025", "1000000000", "99999999999999999999", "4x", ""}) {
    INFO(bad);
    auto a = make();
    CHECK_THROWS_WITH(a.parse({"--threads", bad}), Catch::Contains("--threads"));
  }
  auto a = make();
  CHECK_THROWS_WITH(a.parse({"--threads", "0"}), Catch::Contains("--threads: 0 is out of range (1..1024)"));
  auto b = make();
  CHECK_THROWS_WITH(b.parse({"--top-p", "0"}), Catch::Contains("--top-p: 0 is out of range (0, 1]"));
  auto c = make();
  CHECK_THROWS_WITH(c.parse({"--top-p=nan"}), Catch::Contains("--top-p"));
  auto d = make();
  CHECK_THROWS_WITH(d.parse({"--buckets", "1,2,0"}), Catch::Contains("--buckets: 0 is out of range (1..65536)"));
  auto e = make();
  CHECK_THROWS_WITH(e.parse({"--seed", "-1"}), Catch::Contains("--seed"));
  auto ok = make();
  REQUIRE(ok.parse({"--threads", "1024", "--seed", "18446744073709551615", "--top-p", "1", "--buckets", "1,65536"}));
  CHECK(ok.get_int_as<int>("--threads") == 1024);
  CHECK(ok.get_int_as<uint64_t>("--seed") == UINT64_MAX);
  CHECK(ok.help().find("--threads <N>") != std::string::npos);
  CHECK(ok.help().find("(1..1024)") != std::string::npos);
  CHECK(ok.help().find("(each 1..65536)") != std::string::npos);
}

TEST_CASE("cli: an empty value is a usage error unless the option allows one", "[cli]") {
  CliArgs a("tool", "test tool");
  a.option("--out", "FILE", "output").option("--system", "TEXT", "message").allow_empty();
  CHECK_THROWS_WITH(a.parse({"--out", ""}), Catch::Contains("option --out needs a value <FILE>, got an empty one"));
  CliArgs b("tool", "test tool");
  b.option("--out", "FILE", "output");
  CHECK_THROWS_WITH(b.parse({"--out="}), Catch::Contains("--out"));
  CliArgs c("tool", "test tool");
  c.option("--system", "TEXT", "message").allow_empty();
  REQUIRE(c.parse({"--system", ""}));
  CHECK(c.get("--system").empty());
}

TEST_CASE("cli: a default outside its own declared range is caught at parse time", "[cli]") {
  CliArgs a("tool", "test tool");
  a.option("--repeat", "N", "repetitions", "0").range(IntRange{1, 10});
  CHECK_THROWS_WITH(a.parse(std::vector<std::string>{}), Catch::Contains("--repeat"));
}
