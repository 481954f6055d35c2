// Replays the fuzzer's corpus and regression inputs (tests/tokenizer/fuzz_corpus/) through the same
// invariant checks the libFuzzer target runs, so CI (with ASan) re-checks every input the fuzzer kept.
#include <catch2/catch.hpp>

#include <filesystem>

#include "models/tokenizer/fuzz/fuzz_check.h"
#include "tests/tokenizer/golden_data.h"
#include "common/paths.h"

using namespace qt::tok;
using namespace qt::tok::test;

TEST_CASE("every fuzz corpus input satisfies the encode/decode invariants", "[tokenizer]") {
  std::filesystem::path dir = std::filesystem::path(qt::source_root()) / "tests/tokenizer/fuzz_corpus";
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::string data = read_file(entry.path().string());
    INFO(entry.path().filename().string());
    REQUIRE_NOTHROW(fuzz_check_one(qwen3(), reinterpret_cast<const uint8_t*>(data.data()), data.size()));
    ++n;
  }
  CHECK(n >= 20);
}
