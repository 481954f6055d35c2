#pragma once
// Tokenizer internals shared by the loader and the encoder (not part of the public interface).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/tokenizer/bpe.h"
#include "models/tokenizer/regex.h"
#include "models/tokenizer/tokenizer.h"

namespace qt::tok {

// Finds added tokens in text the way HF's AddedVocabulary does: leftmost-longest, non-overlapping, then
// the single_word / lstrip / rstrip adjustments.
class AddedMatcher {
 public:
  struct Split {
    size_t begin, end;
    int32_t id;  // -1 for plain text between tokens
  };
  void build(const std::vector<const AddedToken*>& tokens);
  bool empty() const { return tokens_.empty(); }
  // Appends the splits of `text` in order (covering it exactly, empty text gives nothing). special_as_text:
  // HF's split_special_tokens — matches of special tokens are found (so they still consume their span, as
  // HF's scan does) and then left as plain text; non-special added tokens (<think>) still split.
  void split(std::string_view text, std::vector<Split>& out, bool special_as_text = false) const;

 private:
  std::vector<const AddedToken*> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices into tokens_, longest first
};

enum TokenKind : uint8_t { kNone = 0, kBpe = 1, kAdded = 2, kSpecial = 3 };

struct Tokenizer::Impl {
  std::string source;
  uint64_t instance = 0;  // unique per loaded tokenizer, keys the per-thread caches

  std::vector<std::string> bytes;  // per id: raw bytes (added tokens: content)
  std::vector<uint8_t> kind;       // per id: TokenKind
  std::unordered_map<std::string, int32_t> bpe_by_bytes;
  std::unordered_map<std::string, int32_t> added_by_content;
  std::array<int32_t, 256> byte_ids{};
  MergeTable merges;
  std::vector<std::pair<std::string, std::string>> merge_strings;
  bool ignore_merges = false;

  std::vector<AddedToken> added;
  AddedMatcher raw_matcher;   // added tokens with normalized=false, matched on the raw text
  AddedMatcher norm_matcher;  // normalized=true, matched after NFC
  bool nfc = true;
  std::unique_ptr<Regex> split_regex;  // null: no Split pre-tokenizer (whole segments go to BPE)

  int32_t eos = -1, bos = -1, pad = -1, endoftext = -1, im_start = -1, im_end = -1, think = -1, end_think = -1;
  std::string chat_template;
  bool chat_template_qwen3 = false;
  uint32_t max_token_length = 0;

  void encode_segment(std::string_view segment, std::vector<int32_t>& out, bool special_as_text = false) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
};

// GPT-2's byte <-> printable code point mapping used by byte-level BPE vocabularies.
const std::array<uint32_t, 256>& byte_to_code_point();
int byte_of_code_point(uint32_t cp);  // -1 when cp is not in the mapping
// A token string of that alphabet as raw bytes; nullopt when a character lies outside the alphabet.
std::optional<std::string> alphabet_to_bytes(std::string_view token);

}  // namespace qt::tok
