// Encoding and decoding. The encode path: validate UTF-8 -> split out added tokens on the raw text ->
// NFC each remaining segment -> split out normalized added tokens -> Split regex -> byte-level BPE per
// pre-token (memoized per thread).
#include "models/tokenizer/tokenizer.h"

#include <memory>

#include "common/error.h"
#include "models/tokenizer/tokenizer_impl.h"
#include "models/tokenizer/utf8.h"

namespace qt::tok {
namespace {

struct ThreadState {
  uint64_t owner = 0;
  std::unique_ptr<PieceCache> cache;
  std::vector<AddedMatcher::Split> splits;
};

PieceCache& thread_cache(uint64_t instance) {
  thread_local ThreadState state;
  if (state.owner != instance || !state.cache) {
    state.cache = std::make_unique<PieceCache>();
    state.owner = instance;
  }
  return *state.cache;
}

}  // namespace

void Tokenizer::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges) {
    auto it = bpe_by_bytes.find(std::string(piece));
    if (it != bpe_by_bytes.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > PieceCache::kMaxPieceBytes) {
    bpe_merge(piece, byte_ids.data(), merges, out);
    return;
  }
  PieceCache& cache = thread_cache(instance);
  uint64_t h = PieceCache::hash(piece);
  if (cache.lookup(piece, h, out)) return;
  size_t before = out.size();
  bpe_merge(piece, byte_ids.data(), merges, out);
  cache.insert(piece, h, out.data() + before, out.size() - before);
}

void Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  if (!split_regex) {
    if (!text.empty()) encode_piece(text, out);
    return;
  }
  size_t pos = 0, b = 0, e = 0;
  while (pos < text.size() && split_regex->find(text, pos, &b, &e)) {
    // Isolated: unmatched stretches between matches are pre-tokens of their own.
    if (b > pos) encode_piece(text.substr(pos, b - pos), out);
    if (e == b) {
      // An empty match never splits anything; step over one character.
      ++e;
      while (e < text.size() && (static_cast<unsigned char>(text[e]) & 0xC0) == 0x80) ++e;
      encode_piece(text.substr(b, e - b), out);
    } else {
      encode_piece(text.substr(b, e - b), out);
    }
    pos = e;
  }
  if (pos < text.size()) encode_piece(text.substr(pos), out);
}

void Tokenizer::Impl::encode_segment(std::string_view segment, std::vector<int32_t>& out, bool special_as_text) const {
  std::string normalized;
  std::string_view text = segment;
  if (nfc && !utf8::nfc_quick_yes(segment)) {
    utf8::append_nfc(segment, normalized);
    text = normalized;
  }
  if (norm_matcher.empty()) {
    encode_normalized(text, out);
    return;
  }
  std::vector<AddedMatcher::Split> splits;
  norm_matcher.split(text, splits, special_as_text);
  for (const auto& s : splits) {
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      encode_normalized(text.substr(s.begin, s.end - s.begin), out);
    }
  }
}

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out, const EncodeOptions& options) const {
  std::string repaired;
  size_t bad_at = utf8::first_invalid(text);
  if (bad_at != text.size()) {
    if (options.invalid_utf8 == InvalidUtf8::kError) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(text[bad_at]));
      throw Error("input is not valid UTF-8: byte " + std::to_string(bad_at) + " (" + hex +
                  ") does not start a well-formed sequence");
    }
    utf8::append_repaired(text, repaired);
    text = repaired;
  }
  const bool special_as_text = !options.parse_added_tokens;
  if (impl_->raw_matcher.empty()) {
    impl_->encode_segment(text, out, special_as_text);
    return;
  }
  std::vector<AddedMatcher::Split> splits;
  impl_->raw_matcher.split(text, splits, special_as_text);
  for (const auto& s : splits) {
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      impl_->encode_segment(text.substr(s.begin, s.end - s.begin), out, special_as_text);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode_into(text, out, options);
  return out;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0) throw Error("cannot decode negative token id " + std::to_string(id));
    // HF drops ids it does not know (e.g. the unused rows 151669..151935 of Qwen3's embedding).
    if (static_cast<size_t>(id) >= impl_->bytes.size()) continue;
    uint8_t k = impl_->kind[static_cast<size_t>(id)];
    if (k == kNone || (skip_special_tokens && k == kSpecial)) continue;
    out.append(impl_->bytes[static_cast<size_t>(id)]);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string raw = decode_bytes(ids, skip_special_tokens);
  if (utf8::first_invalid(raw) == raw.size()) return raw;
  std::string out;
  utf8::append_repaired(raw, out);
  return out;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->bytes.size()) return {};
  return impl_->bytes[static_cast<size_t>(id)];
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->bytes.size()) return std::nullopt;
  uint8_t k = impl_->kind[static_cast<size_t>(id)];
  if (k == kNone) return std::nullopt;
  const std::string& raw = impl_->bytes[static_cast<size_t>(id)];
  if (k != kBpe) return raw;
  std::string out;
  for (unsigned char c : raw) {
    uint32_t cp = byte_to_code_point()[c];
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  auto raw = alphabet_to_bytes(token);
  if (!raw) return std::nullopt;
  auto jt = impl_->bpe_by_bytes.find(*raw);
  if (jt == impl_->bpe_by_bytes.end()) return std::nullopt;
  return jt->second;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kind.size() && impl_->kind[static_cast<size_t>(id)] == kSpecial;
}
bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kind.size() && impl_->kind[static_cast<size_t>(id)] >= kAdded;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->bytes.size()); }
uint32_t Tokenizer::max_token_length() const { return impl_->max_token_length; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
const std::vector<std::pair<std::string, std::string>>& Tokenizer::merges() const { return impl_->merge_strings; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
int32_t Tokenizer::endoftext_id() const { return impl_->endoftext; }
int32_t Tokenizer::im_start_id() const { return impl_->im_start; }
int32_t Tokenizer::im_end_id() const { return impl_->im_end; }
int32_t Tokenizer::think_id() const { return impl_->think; }
int32_t Tokenizer::end_think_id() const { return impl_->end_think; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
bool Tokenizer::chat_template_is_qwen3() const { return impl_->chat_template_qwen3; }
const std::string& Tokenizer::source() const { return impl_->source; }

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::string nfc(std::string_view text) {
  if (utf8::first_invalid(text) != text.size()) throw Error("input is not valid UTF-8");
  std::string out;
  utf8::append_nfc(text, out);
  return out;
}

bool is_valid_utf8(std::string_view text) { return utf8::first_invalid(text) == text.size(); }

std::string repair_utf8(std::string_view bytes) {
  std::string out;
  utf8::append_repaired(bytes, out);
  return out;
}

}  // namespace qt::tok
