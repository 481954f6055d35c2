// Decoding parity with HF (including ids that split UTF-8 characters) and the streaming decoder.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "models/tokenizer/stream_decoder.h"
#include "models/tokenizer/tokenizer_impl.h"
#include "tests/tokenizer/golden_data.h"

using namespace qt::tok;
using namespace qt::tok::test;

namespace {
std::vector<int32_t> ids_of(const nlohmann::json& j) {
  std::vector<int32_t> ids;
  for (const auto& x : j) ids.push_back(x.get<int32_t>());
  return ids;
}
}  // namespace

TEST_CASE("decode matches HF decode on random id runs, with and without special tokens", "[tokenizer]") {
  auto cases = load_json("decode_cases.json");
  REQUIRE(cases.size() >= 400);
  for (const auto& c : cases) {
    auto ids = ids_of(c["ids"]);
    REQUIRE(qwen3().decode(ids) == c["text"].get<std::string>());
    REQUIRE(qwen3().decode(ids, true) == c["text_skip_special"].get<std::string>());
  }
}

TEST_CASE("ids beyond the vocabulary decode to nothing as HF drops them, and negative ids are an error",
          "[tokenizer]") {
  std::vector<int32_t> ids{9707, 151700, 151935, 1879};
  REQUIRE(qwen3().decode(ids) == "Hello world");
  std::vector<int32_t> bad{-1};
  REQUIRE_THROWS_AS(qwen3().decode(bad), qt::Error);
}

TEST_CASE("the stream decoder holds back split characters and reproduces decode exactly", "[tokenizer]") {
  auto cases = load_json("decode_cases.json");
  size_t held = 0;
  for (const auto& c : cases) {
    auto ids = ids_of(c["ids"]);
    for (bool skip : {false, true}) {
      StreamDecoder sd(qwen3(), skip);
      std::string all;
      for (int32_t id : ids) {
        std::string piece = sd.push(id);
        REQUIRE(is_valid_utf8(piece));
        held += sd.pending_bytes() > 0;
        all += piece;
      }
      all += sd.flush();
      REQUIRE(all == c[skip ? "text_skip_special" : "text"].get<std::string>());
    }
  }
  CHECK(held > 0);  // the cases really do split characters across tokens
}

TEST_CASE("streaming an emoji byte by byte emits it only when complete", "[tokenizer]") {
  // U+1F600 is F0 9F 98 80; the single-byte tokens are the ids of those bytes.
  const auto& t = qwen3();
  std::vector<int32_t> ids = t.encode("\xF0\x9F\x98\x80");
  std::vector<int32_t> bytes;
  for (unsigned char b : std::string("\xF0\x9F\x98\x80")) {
    auto id = t.internals().byte_ids[b];
    bytes.push_back(id);
  }
  StreamDecoder sd(t);
  REQUIRE(sd.push(bytes[0]).empty());
  REQUIRE(sd.push(bytes[1]).empty());
  REQUIRE(sd.push(bytes[2]).empty());
  REQUIRE(sd.pending_bytes() == 3);
  REQUIRE(sd.push(bytes[3]) == "\xF0\x9F\x98\x80");
  REQUIRE(sd.flush().empty());
  // A character that never completes becomes U+FFFD at the end, like HF's lossy decode.
  REQUIRE(sd.push(bytes[0]).empty());
  REQUIRE(sd.flush() == "\xEF\xBF\xBD");
  REQUIRE(t.decode(ids) == "\xF0\x9F\x98\x80");
}
