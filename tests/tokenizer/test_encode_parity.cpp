// Encoding parity with HF tokenizers on the committed >= 1 MB corpus, and the pieces it is built from.
#include <catch2/catch.hpp>

#include <cstdio>
#include <thread>

#include "models/tokenizer/bpe.h"
#include "models/tokenizer/tokenizer_impl.h"
#include "models/tokenizer/utf8.h"
#include "tests/tokenizer/golden_data.h"

using namespace qt::tok;
using namespace qt::tok::test;

TEST_CASE("encode gives HF's ids for every document of the 1 MB multilingual corpus", "[tokenizer]") {
  const auto& docs = corpus();
  size_t bytes = 0, ids = 0, mismatched = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto got = qwen3().encode(docs[i].text);
    bytes += docs[i].text.size();
    ids += got.size();
    if (got != docs[i].ids) {
      if (mismatched < 5) std::fprintf(stderr, "document %zu differs from HF\n", i);
      ++mismatched;
    }
  }
  CHECK(bytes >= 1000000);
  CHECK(ids > 500000);
  REQUIRE(mismatched == 0);
}

TEST_CASE("re-encoding a document with the piece cache warm gives HF's ids again", "[tokenizer]") {
  // Each CTest case is its own process, so the first encode here runs cold and the second hits the cache
  // for every piece of the document.
  const auto& docs = corpus();
  for (size_t i = 0; i < docs.size(); i += 7) {
    REQUIRE(qwen3().encode(docs[i].text) == docs[i].ids);
    REQUIRE(qwen3().encode(docs[i].text) == docs[i].ids);
  }
}

TEST_CASE("decode(encode(x)) equals HF's decode, which is NFC(x) except across added-token boundaries",
          "[tokenizer]") {
  size_t differs = 0;
  for (const auto& d : corpus()) {
    REQUIRE(qwen3().decode(qwen3().encode(d.text)) == d.expected_decode);
    if (d.expected_decode != d.text) ++differs;
    if (d.text.find('<') == std::string::npos) REQUIRE(nfc(d.text) == d.expected_decode);
  }
  CHECK(differs > 0);  // the corpus does contain non-NFC text
}

TEST_CASE("the NFC fast path agrees with the full HF-compatible normalization on the corpus", "[tokenizer]") {
  for (const auto& d : corpus()) {
    std::string fast, slow;
    utf8::append_nfc(d.text, fast);
    utf8::append_nfc_slow(d.text, slow);
    REQUIRE(fast == slow);
  }
}

TEST_CASE("marks newer than HF's Unicode tables are left in place, as HF's NFC does", "[tokenizer]") {
  // U+09FE (ccc 230 since Unicode 11) before U+09CD (ccc 9): current NFC swaps them, HF does not.
  std::string text = "\xE0\xA6\xBC\xE0\xA7\xBE\xE0\xA7\x8D";
  REQUIRE(utf8::nfc_reference(text) != text);
  REQUIRE(nfc(text) == text);
}

TEST_CASE("the quadratic and heap BPE loops agree on long single pieces", "[tokenizer]") {
  const auto& impl = qwen3().internals();
  for (const auto& d : corpus()) {
    if (d.text.size() < 100) continue;
    std::string_view piece = std::string_view(d.text).substr(0, 700);
    std::vector<int32_t> a, b;
    bpe_merge_small(piece, impl.byte_ids.data(), impl.merges, a);
    bpe_merge_heap(piece, impl.byte_ids.data(), impl.merges, b);
    REQUIRE(a == b);
  }
}

TEST_CASE("added tokens are recognised before pre-tokenization, with plain-text mode on request", "[tokenizer]") {
  const auto& t = qwen3();
  auto ids = t.encode("<|im_start|>user\nhi<|im_end|>");
  REQUIRE(ids.front() == 151644);
  REQUIRE(ids.back() == 151645);
  EncodeOptions plain;
  plain.parse_added_tokens = false;
  auto as_text = t.encode("<|im_start|>", plain);
  REQUIRE(as_text.size() > 1);
  REQUIRE(t.decode(as_text) == "<|im_start|>");
  REQUIRE(t.encode("<think>") == std::vector<int32_t>{151667});
  REQUIRE(t.encode("</think>") == std::vector<int32_t>{151668});
}

TEST_CASE("plain-text mode gives HF's split_special_tokens=True ids: special tokens split, <think> kept",
          "[tokenizer]") {
  EncodeOptions plain;
  plain.parse_added_tokens = false;
  auto cases = load_json("split_special_cases.json");
  REQUIRE(cases.size() >= 10);
  for (const auto& c : cases) {
    std::string text = c["text"].get<std::string>();
    INFO(text);
    REQUIRE(qwen3().encode(text, plain) == c["ids"].get<std::vector<int32_t>>());
  }
}

TEST_CASE("token and id lookups and special ids match tokenizer.json and tokenizer_config.json", "[tokenizer]") {
  const auto& t = qwen3();
  CHECK(t.vocab_size() == 151669);
  CHECK(t.merges().size() == 151387);
  CHECK(t.added_tokens().size() == 26);
  CHECK(t.eos_id() == 151645);
  CHECK(t.bos_id() == 151643);
  CHECK(t.pad_id() == 151643);
  CHECK(t.im_start_id() == 151644);
  CHECK(t.im_end_id() == 151645);
  CHECK(t.think_id() == 151667);
  CHECK(t.end_think_id() == 151668);
  CHECK(t.chat_template_is_qwen3());
  CHECK(t.token_to_id("Ġhello") == std::optional<int32_t>(23811));
  CHECK(t.id_to_token(23811) == std::optional<std::string>("Ġhello"));
  CHECK(t.token_bytes(23811) == " hello");
  CHECK(t.token_to_id("<|im_end|>") == std::optional<int32_t>(151645));
  CHECK(t.token_to_id("not-a-token-at-all") == std::nullopt);
  CHECK(t.is_special(151645));
  CHECK_FALSE(t.is_special(151667));  // <think> is added but not special
  CHECK(t.is_added(151667));
  for (int32_t id = 0; id < t.vocab_size(); id += 97) {
    auto name = t.id_to_token(id);
    REQUIRE(name);
    REQUIRE(t.token_to_id(*name) == std::optional<int32_t>(id));
  }
}

TEST_CASE("encoding from several threads at once gives the same ids (per-thread caches)", "[tokenizer]") {
  const auto& docs = corpus();
  std::vector<std::thread> threads;
  std::vector<size_t> mismatches(4, 0);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < docs.size(); i += 4) mismatches[t] += qwen3().encode(docs[i].text) != docs[i].ids;
    });
  }
  for (auto& th : threads) th.join();
  for (size_t m : mismatches) REQUIRE(m == 0);
}
