#define PCRE2_CODE_UNIT_WIDTH 8
#include "models/tokenizer/regex.h"

#include <pcre2.h>

#include <cstdint>
#include <cstdio>

#include "common/error.h"

namespace qt::tok {
namespace {

// One match data block per thread, large enough for the whole-match pair (the patterns' groups are unused).
struct MatchData {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(md); }
};

pcre2_match_data* thread_match_data() {
  thread_local MatchData data;
  return data.md;
}

// The Unicode White_Space property, which is what \s means to Oniguruma (HF's regex engine). PCRE2's UCP
// \s also matches U+180E (a space until Unicode 6.3), which would split Mongolian text differently.
constexpr const char* kWhiteSpace = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

struct CodeRange {
  uint32_t first, last;
};
#include "models/tokenizer/unicode_classes.inc"

// The ranges as PCRE2 class items (no brackets), so they can stand inside a larger class.
template <size_t N>
std::string class_items(const CodeRange (&ranges)[N]) {
  std::string out;
  char buf[32];
  for (const CodeRange& r : ranges) {
    if (r.first == r.last) {
      std::snprintf(buf, sizeof(buf), "\\x{%X}", r.first);
    } else {
      std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", r.first, r.last);
    }
    out += buf;
  }
  return out;
}

const std::string& letter_items() {
  static const std::string items = class_items(kLetterRanges);
  return items;
}

const std::string& number_items() {
  static const std::string items = class_items(kNumberRanges);
  return items;
}

// \p{L} / \p{N} (or \P{..}) at pattern[i] (the backslash); the class items and whether it is negated, or null.
const std::string* unicode_class_at(const std::string& pattern, size_t i, bool* negated, size_t* length) {
  if (pattern.compare(i + 1, 1, "p") != 0 && pattern.compare(i + 1, 1, "P") != 0) return nullptr;
  *negated = pattern[i + 1] == 'P';
  *length = 5;
  if (pattern.compare(i + 2, 3, "{L}") == 0) return &letter_items();
  if (pattern.compare(i + 2, 3, "{N}") == 0) return &number_items();
  return nullptr;
}

}  // namespace

std::string onig_compatible_pattern(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      bool negated = false;
      size_t length = 0;
      if (const std::string* items = unicode_class_at(pattern, i, &negated, &length)) {
        if (in_class && negated) throw Error("pre-tokenizer regex: \\P{L} / \\P{N} inside a class is not supported");
        out += in_class ? *items : (negated ? "[^" : "[") + *items + "]";
        i += length - 1;
        continue;
      }
      char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after the opening bracket is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, bool onig_classes) : pattern_(onig_classes ? onig_compatible_pattern(pattern) : pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error("pre-tokenizer regex does not compile at offset " + std::to_string(offset) + ": " +
                reinterpret_cast<const char*>(msg));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::find(std::string_view subject, size_t start, size_t* match_begin, size_t* match_end) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = thread_match_data();
  auto subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = jit_ ? pcre2_jit_match(code, subj, subject.size(), start, 0, md, nullptr)
                : pcre2_match(code, subj, subject.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    throw Error(std::string("pre-tokenizer regex match failed: ") + reinterpret_cast<const char*>(msg), kExitFailure);
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  *match_begin = ov[0];
  *match_end = ov[1];
  return true;
}

}  // namespace qt::tok
