// Input hardening (also run under ASan+UBSan): invalid UTF-8, malformed tokenizer files and malformed
// qwen3.c files are clear qt::Errors, never crashes; the documented replacement mode matches Python.
#include <catch2/catch.hpp>

#include <random>

#include "common/error.h"
#include "models/tokenizer/qwen3c.h"
#include "models/tokenizer/stream_decoder.h"
#include "models/tokenizer/tokenizer_impl.h"
#include "tests/tokenizer/golden_data.h"

using namespace qt::tok;
using namespace qt::tok::test;

TEST_CASE("invalid UTF-8 is an error naming the byte, and replace mode matches Python's errors='replace'",
          "[tokenizer]") {
  auto cases = load_json("utf8_cases.json");
  size_t invalid = 0;
  for (const auto& c : cases) {
    auto raw = from_hex(c["hex"].get<std::string>());
    std::string_view text(reinterpret_cast<const char*>(raw.data()), raw.size());
    INFO("bytes " << c["hex"].get<std::string>());
    REQUIRE(is_valid_utf8(text) == c["valid"].get<bool>());
    REQUIRE(repair_utf8(text) == c["repaired"].get<std::string>());
    std::vector<int32_t> expected;
    for (const auto& x : c["ids"]) expected.push_back(x.get<int32_t>());
    EncodeOptions replace;
    replace.invalid_utf8 = InvalidUtf8::kReplace;
    REQUIRE(qwen3().encode(text, replace) == expected);
    if (!c["valid"].get<bool>()) {
      ++invalid;
      REQUIRE_THROWS_WITH(qwen3().encode(text), Catch::Contains("not valid UTF-8") && Catch::Contains("byte"));
    }
  }
  CHECK(invalid >= 17);
}

TEST_CASE("the stream decoder never emits broken UTF-8 for random id sequences", "[tokenizer]") {
  std::mt19937 rng(7);
  // Ids 0..255 are mostly lone bytes (partial characters); mix in ordinary and added tokens.
  std::uniform_int_distribution<int32_t> low(0, 400), any(0, qwen3().vocab_size() - 1);
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> ids;
    for (int k = 0; k < 50; ++k) ids.push_back(k % 3 ? low(rng) : any(rng));
    StreamDecoder sd(qwen3());
    std::string all;
    for (int32_t id : ids) {
      std::string piece = sd.push(id);
      REQUIRE(is_valid_utf8(piece));
      all += piece;
    }
    all += sd.flush();
    REQUIRE(all == qwen3().decode(ids));
  }
}

TEST_CASE("malformed tokenizer.json content is rejected with a message naming the problem", "[tokenizer]") {
  auto expect = [](const std::string& json, const std::string& fragment) {
    INFO(json);
    REQUIRE_THROWS_WITH(Tokenizer::from_json(json, "", "t.json"), Catch::Contains("t.json") && Catch::Contains(fragment));
  };
  expect("{", "not valid JSON");
  expect("{}", "unexpected structure");
  expect(R"({"normalizer": {"type": "NFKC"}, "model": {}})", "unsupported normalizer");
  expect(R"({"normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "model": {}})", "unsupported pre-tokenizer");
  expect(R"({"normalizer": null, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}, "model": {}})",
         "regex");
  expect(R"({"normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "use_regex": false}, "model": {"type": "WordPiece"}})",
         "BPE");
  expect(R"({"normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "use_regex": false}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
         "byte");
  REQUIRE_THROWS_WITH(Tokenizer::load("/nonexistent/dir/tokenizer.json"), Catch::Contains("/nonexistent/dir/tokenizer.json"));
}

namespace {
// The 256 byte tokens every byte-level vocabulary needs (ids 0..255), spelled via Qwen3's alphabet.
nlohmann::json byte_vocab() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[*qwen3().id_to_token(qwen3().internals().byte_ids[static_cast<size_t>(b)])] = b;
  return vocab;
}
}  // namespace

TEST_CASE("token ids beyond 2^24 - 1 or below 0 are rejected before any table is sized by them", "[tokenizer]") {
  const nlohmann::json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  for (const nlohmann::json& id : {nlohmann::json(2147483647), nlohmann::json(-1), nlohmann::json(4294967301u)}) {
    INFO("id " << id.dump());
    nlohmann::json vocab = byte_vocab();
    vocab["zz"] = id;
    nlohmann::json bad_vocab = {{"normalizer", nullptr}, {"pre_tokenizer", pre},
                                {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
    REQUIRE_THROWS_WITH(Tokenizer::from_json(bad_vocab.dump(), "", "t.json"),
                        Catch::Contains("t.json") && Catch::Contains("'zz'") && Catch::Contains("ids must be integers"));
    nlohmann::json bad_added = {{"normalizer", nullptr}, {"pre_tokenizer", pre},
                                {"model", {{"type", "BPE"}, {"vocab", byte_vocab()}, {"merges", nlohmann::json::array()}}},
                                {"added_tokens", {{{"id", id}, {"content", "<x>"}, {"special", true}}}}};
    REQUIRE_THROWS_WITH(Tokenizer::from_json(bad_added.dump(), "", "t.json"),
                        Catch::Contains("'<x>'") && Catch::Contains("ids must be integers"));
  }
}

TEST_CASE("one id, one token: vocabulary or added tokens that give an id two texts are rejected, the same text twice "
          "is not", "[tokenizer]") {
  const nlohmann::json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  auto tokenizer = [&](const nlohmann::json& vocab, const nlohmann::json& added) {
    return nlohmann::json{{"normalizer", nullptr}, {"pre_tokenizer", pre},
                          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                          {"added_tokens", added}}.dump();
  };
  nlohmann::json shared = byte_vocab();
  shared["zz"] = 0;  // byte 0's id
  CHECK_THROWS_WITH(Tokenizer::from_json(tokenizer(shared, nlohmann::json::array()), "", "t.json"),
                    Catch::Contains("t.json") && Catch::Contains("vocabulary tokens share id 0"));
  nlohmann::json vocab = byte_vocab();
  vocab["<s>"] = 256;
  CHECK_THROWS_WITH(
      Tokenizer::from_json(tokenizer(vocab, {{{"id", 97}, {"content", "<x>"}, {"special", true}}}), "", "t.json"),
      Catch::Contains("added token '<x>' takes id 97, which the vocabulary gives to another token"));
  CHECK_THROWS_WITH(Tokenizer::from_json(tokenizer(vocab, {{{"id", 300}, {"content", "<x>"}, {"special", true}},
                                                           {{"id", 300}, {"content", "<y>"}, {"special", true}}}),
                                         "", "t.json"),
                    Catch::Contains("added tokens share id 300"));
  // An added token naming a vocabulary token by its own id and text, as many tokenizer.json files do.
  const Tokenizer t = Tokenizer::from_json(tokenizer(vocab, {{{"id", 256}, {"content", "<s>"}, {"special", true}}}));
  CHECK(t.encode("<s>") == std::vector<int32_t>{256});
}

TEST_CASE("a BPE tokenizer built from JSON follows merges by rank and leftmost on ties", "[tokenizer]") {
  nlohmann::json vocab = byte_vocab();
  vocab["aa"] = 256;
  vocab["ab"] = 257;
  vocab["aab"] = 258;
  nlohmann::json j = {{"normalizer", nullptr},
                      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
                      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "a a", "aa b"}}}},
                      {"added_tokens", nlohmann::json::array()}};
  Tokenizer t = Tokenizer::from_json(j.dump());
  // "aab": rank 0 (a,b) beats (a,a) -> a + ab; "aaa": leftmost (a,a) first -> aa + a.
  REQUIRE(t.encode("aab") == std::vector<int32_t>{97, 257});
  REQUIRE(t.encode("aaa") == std::vector<int32_t>{256, 97});
}

TEST_CASE("a merge listed twice takes its last rank, as HF's merge map does", "[tokenizer]") {
  nlohmann::json vocab = byte_vocab();
  vocab["ab"] = 256;
  vocab["bc"] = 257;
  auto make = [&](const nlohmann::json& merges) {
    nlohmann::json j = {{"normalizer", nullptr},
                        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
                        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    return Tokenizer::from_json(j.dump());
  };
  // tokenizers 0.23.3, models.BPE with the same merges, encodes "abc" as ['a', 'bc'] and ['ab', 'c'].
  REQUIRE(make({"a b", "b c", "a b"}).encode("abc") == std::vector<int32_t>{97, 257});
  REQUIRE(make({"b c", "a b", "b c"}).encode("abc") == std::vector<int32_t>{256, 99});
}

TEST_CASE("malformed qwen3.c tokenizer files are rejected with the entry named", "[tokenizer]") {
  Qwen3cTokenizer small;
  small.max_token_length = 3;
  small.bos_id = 0;
  small.eos_id = 1;
  small.tokens = {"a", "bc", "def"};
  small.scores = {-1e6f, -1.0f, -2.0f};
  auto bytes = serialize_qwen3c_tokenizer(small);
  auto back = parse_qwen3c_tokenizer(bytes.data(), bytes.size(), "mem");
  REQUIRE(back.tokens == small.tokens);
  REQUIRE(back.scores == small.scores);
  REQUIRE_THROWS_WITH(parse_qwen3c_tokenizer(bytes.data(), 5, "mem"), Catch::Contains("header"));
  // With the vocabulary size known (as a model gives it), every truncation is detected.
  for (size_t cut = 12; cut < bytes.size(); ++cut) {
    REQUIRE_THROWS_AS(parse_qwen3c_tokenizer(bytes.data(), cut, "mem", 3), qt::Error);
  }
  auto huge = bytes;
  huge[12 + 4 + 3] = 0x7F;  // entry 0 length field -> ~2 GB
  REQUIRE_THROWS_WITH(parse_qwen3c_tokenizer(huge.data(), huge.size(), "mem"), Catch::Contains("entry 0"));
  REQUIRE_THROWS_WITH(parse_qwen3c_tokenizer(bytes.data(), bytes.size(), "mem", 4), Catch::Contains("expected 4"));
  auto bad_eos = bytes;
  bad_eos[8] = 9;
  REQUIRE_THROWS_WITH(parse_qwen3c_tokenizer(bad_eos.data(), bad_eos.size(), "mem"), Catch::Contains("bos/eos"));
}

TEST_CASE("single_word added tokens treat a newline before them as a boundary, as HF does", "[tokenizer]") {
  // HF tests the text around a single_word token with Rust-regex \w$ and ^\w, whose $ is the end of the
  // text only; a PCRE $ would also match before a final newline and reject the token after "ab\n".
  nlohmann::json j = nlohmann::json::parse(read_file(tokenizer_dir() + "/tokenizer.json"));
  j["added_tokens"].push_back({{"id", 151669}, {"content", "<sw>"}, {"single_word", true}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", false}});
  Tokenizer t = Tokenizer::from_json(j.dump());
  // Expected ids from tokenizers 0.23.3 with the same token added (AddedToken(single_word=True)).
  REQUIRE(t.encode("ab\n<sw>") == std::vector<int32_t>{370, 198, 151669});
  REQUIRE(t.encode("a\n<sw>\n") == std::vector<int32_t>{64, 198, 151669, 198});
  REQUIRE(t.encode("x <sw>\ny") == std::vector<int32_t>{87, 220, 151669, 198, 88});
  REQUIRE(t.encode("ab<sw>") == std::vector<int32_t>{370, 27, 2280, 29});
}
