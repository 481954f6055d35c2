#include "runtime/report/text_escape.h"

#include <utf8proc.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>

namespace qt::report {
namespace {

constexpr utf8proc_int32_t kReplacement = 0xFFFD;

void append_code_point(std::string& out, utf8proc_int32_t cp) {
  utf8proc_uint8_t b[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(cp, b);
  out.append(reinterpret_cast<const char*>(b), size_t(n));
}

// Calls `f` with each code point of `s`; an ill-formed byte is reported as U+FFFD.
void for_each_code_point(const std::string& s, const std::function<void(utf8proc_int32_t)>& f) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p + i, utf8proc_ssize_t(s.size() - i), &cp);
    if (n <= 0) {
      f(kReplacement);
      ++i;
    } else {
      f(cp);
      i += size_t(n);
    }
  }
}

// Line breaks and other controls: a one-line rendering has no place for them.
bool breaks_line(utf8proc_int32_t cp) {
  return (cp > 0 && cp < 0x20) || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || cp == 0x2028 || cp == 0x2029;
}

// `s` with controls as spaces, NUL and bad bytes as U+FFFD, and no space at either end (a list item's
// leading spaces would make it a code block).
std::string one_line(const std::string& s) {
  std::string out;
  for_each_code_point(s, [&](utf8proc_int32_t cp) {
    if (cp == 0) append_code_point(out, kReplacement);
    else if (breaks_line(cp)) out += ' ';
    else append_code_point(out, cp);
  });
  const size_t first = out.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

}  // namespace

std::string markdown_text(const std::string& s) {
  // CommonMark lets any ASCII punctuation be escaped. These can start or end markup anywhere in a line:
  // emphasis, code, links and images, HTML and entities, table cells, a heading's closing #s, strikethrough.
  static const char* const kInline = "\\`*[]<>&|#!~";
  const std::string line = one_line(s);
  // These start a block (a list, a setext line) when they open a list item's text: "- 1. x" nests a list.
  size_t digits = 0;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  const size_t block_marker = !line.empty() && std::strchr("-+=", line[0]) ? 0
                              : digits > 0 && digits < line.size() && (line[digits] == '.' || line[digits] == ')')
                                  ? digits
                                  : std::string::npos;
  auto alnum = [&](size_t i) { return i < line.size() && std::isalnum(static_cast<unsigned char>(line[i])); };
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    // An underscore inside a word (AWQ_INT4, q_proj) can neither open nor close emphasis: left as it is.
    const bool emphasis = line[i] == '_' && !(i > 0 && alnum(i - 1) && alnum(i + 1));
    if (i == block_marker || emphasis || (line[i] != '\0' && std::strchr(kInline, line[i]))) out += '\\';
    out += line[i];
  }
  return out;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for_each_code_point(s, [&](utf8proc_int32_t cp) {
    switch (cp) {
      case '&': out += "&amp;"; return;
      case '<': out += "&lt;"; return;
      case '>': out += "&gt;"; return;
      case '"': out += "&quot;"; return;
      case '\'': out += "&apos;"; return;
      default: break;
    }
    // XML 1.0's Char production allows tab, line feed, carriage return and everything from U+0020 but the
    // non-characters U+FFFE and U+FFFF (utf8proc never yields surrogates).
    if (cp == 0x9 || cp == 0xA || cp == 0xD) out += ' ';  // a label is one line
    else append_code_point(out, cp >= 0x20 && cp != 0xFFFE && cp != 0xFFFF ? cp : kReplacement);
  });
  return out;
}

std::string shorten(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  const size_t keep = max_bytes > 3 ? max_bytes - 3 : 0;
  std::string out;
  for_each_code_point(s, [&, full = false](utf8proc_int32_t cp) mutable {
    if (full) return;
    std::string next;
    append_code_point(next, cp);
    if (out.size() + next.size() > keep) full = true;
    else out += next;
  });
  return out + "...";
}

}  // namespace qt::report
