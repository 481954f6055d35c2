// The qwen3.c .tokenizer file: byte-exact against the exporter's rules (hash from the golden script) and
// read back losslessly.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

#include "models/tokenizer/qwen3c.h"
#include "tests/tokenizer/golden_data.h"
#include "common/paths.h"

using namespace qt::tok;
using namespace qt::tok::test;

namespace {
uint64_t fnv1a(const std::vector<uint8_t>& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t c : data) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}
}  // namespace

TEST_CASE("the qwen3.c tokenizer file is byte-identical to the exporter's", "[tokenizer]") {
  auto expected = load_json("qwen3c_expected.json");
  Qwen3cTokenizer table = to_qwen3c(qwen3());
  CHECK(table.max_token_length == expected["max_token_length"].get<uint32_t>());
  CHECK(table.bos_id == 151643);
  CHECK(table.eos_id == 151645);
  REQUIRE(table.tokens.size() == expected["count"].get<size_t>());
  for (const auto& s : expected["samples"]) {
    size_t id = s["id"].get<size_t>();
    INFO("id " << id);
    CHECK(table.scores[id] == Approx(s["score"].get<double>()).epsilon(0));
    CHECK(hex(table.tokens[id]) == s["hex"].get<std::string>());
  }
  auto bytes = serialize_qwen3c_tokenizer(table);
  REQUIRE(bytes.size() == expected["size"].get<size_t>());
  char h[17];
  std::snprintf(h, sizeof(h), "%016llx", static_cast<unsigned long long>(fnv1a(bytes)));
  REQUIRE(std::string(h) == expected["fnv1a64"].get<std::string>());
}

TEST_CASE("a written qwen3.c tokenizer file reads back to the same table", "[tokenizer]") {
  Qwen3cTokenizer table = to_qwen3c(qwen3());
  std::string path = qt::binary_root() + "/tests/qwen3c_roundtrip_" + std::to_string(getpid()) + ".tokenizer";
  write_qwen3c_tokenizer(qwen3(), path);
  Qwen3cTokenizer back = read_qwen3c_tokenizer(path, qwen3().vocab_size());
  std::remove(path.c_str());
  REQUIRE(back.max_token_length == table.max_token_length);
  REQUIRE(back.bos_id == table.bos_id);
  REQUIRE(back.eos_id == table.eos_id);
  REQUIRE(back.tokens == table.tokens);
  REQUIRE(back.scores == table.scores);
}
