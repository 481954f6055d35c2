#pragma once
// Hugging Face-exact byte-level BPE tokenizer for Qwen3 (and any tokenizer.json of the same family:
// NFC normalizer, Split-regex + ByteLevel pre-tokenizer, BPE model with merges, added tokens).
//
// encode() produces the ids `tokenizers.Tokenizer.encode(text).ids` produces (Qwen2's post-processor adds no
// special tokens). Added tokens (<|im_start|>, <think>, ...) are recognised in the raw text before
// normalization and pre-tokenization, as HF's AddedVocabulary does. A Tokenizer is immutable after loading;
// every const method is safe to call from several threads at once (the encode cache is per thread).
//
// Related headers: models/tokenizer/chat.h (apply_chat_template for Qwen3), models/tokenizer/qwen3c.h (the
// qwen3.c `.tokenizer` binary file), models/tokenizer/stream_decoder.h (token-by-token UTF-8-safe printing).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qt::tok {

// One entry of tokenizer.json's "added_tokens" (flags as HF defines them).
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match also swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool normalized = false;   // matched against the NFC-normalized text instead of the raw text
  bool single_word = false;  // only matched when not inside a word
};

// What encode() does with bytes that are not valid UTF-8. HF's Python API cannot even receive such input
// (str is always valid), so the default refuses it; kReplace decodes like Python's
// bytes.decode("utf-8", "replace") (each maximal invalid subpart becomes U+FFFD) and then encodes that.
enum class InvalidUtf8 { kError, kReplace };

struct EncodeOptions {
  InvalidUtf8 invalid_utf8 = InvalidUtf8::kError;
  // false is HF's split_special_tokens=True: special added tokens (<|im_start|>, ...) are plain text, while
  // non-special ones (<think>, <tool_call>) are still recognised.
  bool parse_added_tokens = true;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding tokenizer.json. tokenizer_config.json beside
  // it (optional) supplies eos/bos/pad tokens and the chat template. Throws qt::Error naming the file on
  // any malformed or unsupported content.
  static Tokenizer load(const std::string& path);
  // Loads from the JSON text itself (config_json may be empty); `origin` names it in error messages.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             const std::string& origin = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // UTF-8 text -> ids, HF-exact. Throws qt::Error on invalid UTF-8 unless options say kReplace.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Appends to `out` (reuse one vector to avoid allocations in hot loops).
  void encode_into(std::string_view text, std::vector<int32_t>& out, const EncodeOptions& options = {}) const;

  // ids -> text like HF decode(ids, skip_special_tokens=...): the tokens' bytes concatenated, invalid UTF-8
  // replaced by U+FFFD (maximal subparts, as Rust's from_utf8_lossy). Ids >= vocab_size() (e.g. the unused
  // embedding rows 151669..151935 a model may still sample) are skipped, as HF skips them; a negative id
  // throws qt::Error.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The exact bytes, without UTF-8 repair (may end inside a character).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Raw bytes of one token (an added token's content); empty view for an unknown id.
  std::string_view token_bytes(int32_t id) const;
  // The token's string as tokenizer.json spells it (byte-level alphabet, e.g. "Ġhello"; added tokens as is).
  std::optional<std::string> id_to_token(int32_t id) const;
  // Inverse of id_to_token: vocabulary string (byte-level alphabet) or added token content -> id.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;  // an added token with special=true
  bool is_added(int32_t id) const;

  // Number of ids (max id + 1); 151669 for Qwen3 (the model's embedding may be larger).
  int32_t vocab_size() const;
  // Length in code points of the longest token string as tokenizer.json spells it (qwen3.c header field).
  uint32_t max_token_length() const;
  const std::vector<AddedToken>& added_tokens() const;
  // The BPE merges in rank order, each as the two token strings (byte-level alphabet).
  const std::vector<std::pair<std::string, std::string>>& merges() const;

  // Special ids; -1 when the tokenizer does not define one. eos is tokenizer_config's eos_token
  // (Qwen3: <|im_end|> 151645). bos is tokenizer_config's bos_token, else <|endoftext|> (151643), which is
  // what Qwen3's config.json names as bos_token_id. pad is tokenizer_config's pad_token.
  int32_t eos_id() const;
  int32_t bos_id() const;
  int32_t pad_id() const;
  int32_t endoftext_id() const;  // <|endoftext|>
  int32_t im_start_id() const;   // <|im_start|>
  int32_t im_end_id() const;     // <|im_end|>
  int32_t think_id() const;      // <think>
  int32_t end_think_id() const;  // </think>

  // tokenizer_config.json's chat_template ("" when absent) and whether it is the Qwen3 template that
  // render_chat (chat.h) reproduces.
  const std::string& chat_template() const;
  bool chat_template_is_qwen3() const;

  const std::string& source() const;  // the path (or origin) it was loaded from

  struct Impl;  // defined in tokenizer_impl.h (internal)
  const Impl& internals() const { return *impl_; }  // for white-box tests and the fuzzer

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The tokenizer shipped with qtune (qt::default_hf_tokenizer_path()).
Tokenizer load_default_tokenizer();

// NFC-normalizes valid UTF-8 exactly as HF tokenizers' NFC normalizer does (utf8proc, except combining
// marks newer than HF's Unicode tables, which HF leaves in place). Throws qt::Error on invalid UTF-8.
std::string nfc(std::string_view utf8);
// True when `text` is well-formed UTF-8 (no surrogates, no overlongs, max U+10FFFF).
bool is_valid_utf8(std::string_view text);
// Python's bytes.decode("utf-8", "replace"): each maximal invalid subpart becomes U+FFFD.
std::string repair_utf8(std::string_view bytes);

}  // namespace qt::tok
