#include <algorithm>

#include "models/tokenizer/regex.h"
#include "models/tokenizer/tokenizer_impl.h"

namespace qt::tok {
namespace {

// HF decides "word" and "space" for single_word / lstrip / rstrip with Rust-regex \w and \s (Unicode);
// PCRE2 in UCP mode gives the same classes. Rust's $ is the end of the text only, so the anchors are \z:
// PCRE's $ would also match before a final newline and reject a single_word token after "ab\n".
const Regex& word_at_end() {
  static const Regex r("\\w\\z");
  return r;
}
const Regex& word_at_start() {
  static const Regex r("^\\w");
  return r;
}
const Regex& spaces_at_end() {
  static const Regex r("\\s*\\z");
  return r;
}
const Regex& spaces_at_start() {
  static const Regex r("^\\s*");
  return r;
}

}  // namespace

void AddedMatcher::build(const std::vector<const AddedToken*>& tokens) {
  tokens_ = tokens;
  for (auto& v : by_first_byte_) v.clear();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i]->content[0])].push_back(static_cast<uint32_t>(i));
  }
  for (auto& v : by_first_byte_) {
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a]->content.size() > tokens_[b]->content.size();
    });
  }
}

void AddedMatcher::split(std::string_view text, std::vector<Split>& out, bool special_as_text) const {
  size_t emitted = 0;  // text before this offset is already covered by splits
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    const auto& cands = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (uint32_t c : cands) {
      const std::string& s = tokens_[c]->content;
      if (s.size() <= n - pos && text.compare(pos, s.size(), s) == 0) {
        hit = tokens_[c];
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + hit->content.size();
    pos = stop;  // the scan resumes after this match even if the flags below reject it, as HF's does
    if (special_as_text && hit->special) continue;
    size_t b = 0, e = 0;
    if (hit->single_word) {
      bool word_before = start > 0 && word_at_end().find(text.substr(0, start), 0, &b, &e);
      bool word_after = stop < n && word_at_start().find(text.substr(stop), 0, &b, &e);
      if (word_before || word_after) continue;
    }
    if (hit->lstrip && spaces_at_end().find(text.substr(0, start), 0, &b, &e)) start = std::max(b, emitted);
    if (hit->rstrip && spaces_at_start().find(text.substr(stop), 0, &b, &e)) stop += e;
    if (emitted < start) out.push_back({emitted, start, -1});
    out.push_back({start, stop, hit->id});
    emitted = stop;
    pos = std::max(pos, stop);
  }
  if (emitted < n) out.push_back({emitted, n, -1});
}

}  // namespace qt::tok
