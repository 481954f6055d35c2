#pragma once
// PCRE2 wrapper (internal) for the pre-tokenizer Split regex: compiled once with UTF + UCP (so \s, \p{L},
// \p{N} and case-insensitive groups follow Unicode, as HF's Oniguruma does) and JIT-compiled when the
// platform supports it. Matching is thread-safe; each thread keeps its own match data.
#include <cstddef>
#include <string>
#include <string_view>

namespace qt::tok {

// The pattern with \s / \S spelled as the explicit Unicode White_Space class, and \p{L} / \p{N} (and their
// \P negations outside classes) spelled as explicit ranges from unicode_classes.inc (Unicode 16.0, HF's
// version; PCRE2's own tables follow the installed library's older Unicode), so PCRE2 splits where
// Oniguruma does. Other constructs are copied unchanged.
std::string onig_compatible_pattern(const std::string& pattern);

class Regex {
 public:
  // onig_classes: rewrite \s and \S to Oniguruma's meaning first (see onig_compatible_pattern).
  explicit Regex(const std::string& pattern, bool onig_classes = true);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first match in subject[start..); returns false when there is none. subject must be valid
  // UTF-8 (the caller validated it, so PCRE2's own check is skipped).
  bool find(std::string_view subject, size_t start, size_t* match_begin, size_t* match_end) const;
  bool jit() const { return jit_; }
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace qt::tok
