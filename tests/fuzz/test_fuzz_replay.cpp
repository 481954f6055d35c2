// Replays every parser's fuzz corpus (tests/fuzz/corpus/<target>/) through the same entries the libFuzzer
// executables run, so CI (and its ASan+UBSan pass) re-checks every input the fuzzers kept.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/fuzz_entries.h"
#include "common/paths.h"

namespace {

size_t replay(const qt::fuzz::Target& t) {
  const std::filesystem::path dir = std::filesystem::path(qt::source_root()) / "tests/fuzz/corpus" / t.name;
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream f(entry.path(), std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    const std::string data = s.str();
    INFO(t.name << ": " << entry.path().filename().string());
    REQUIRE_NOTHROW(t.entry(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("every parser's fuzz corpus replays with only qt::Error for bad input", "[fuzz]") {
  REQUIRE(qt::fuzz::targets().size() == 8);
  for (const auto& t : qt::fuzz::targets()) {
    size_t n = replay(t);
    INFO(t.name);
    CHECK(n >= 5);
  }
}
