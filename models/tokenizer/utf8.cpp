#include "models/tokenizer/utf8.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <cstring>
#include <memory>

#include "common/error.h"

namespace qt::tok::utf8 {
namespace {

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Allowed range of the second byte for a lead byte (Unicode Table 3-7); {1, 0} for an invalid lead.
struct Range {
  unsigned char lo, hi;
};
Range second_byte_range(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {0x80, 0xBF};
  if (lead == 0xE0) return {0xA0, 0xBF};
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return {0x80, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {0x80, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};
  return {1, 0};
}

size_t expected_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Number of bytes from s[i] that are a valid prefix of a sequence (stops at n).
size_t valid_prefix(const unsigned char* s, size_t n, size_t i, size_t* need) {
  unsigned char lead = s[i];
  *need = expected_length(lead);
  if (*need <= 1) return *need;
  size_t k = 1;
  if (i + 1 >= n) return 1;
  Range r = second_byte_range(lead);
  if (s[i + 1] < r.lo || s[i + 1] > r.hi) return 1;
  k = 2;
  while (k < *need && i + k < n && is_cont(s[i + k])) ++k;
  return k;
}

}  // namespace

size_t sequence_length(const unsigned char* s, size_t n, size_t i) {
  size_t need = 0;
  size_t k = valid_prefix(s, n, i, &need);
  return (need != 0 && k == need) ? need : 0;
}

size_t invalid_subpart_length(const unsigned char* s, size_t n, size_t i) {
  size_t need = 0;
  size_t k = valid_prefix(s, n, i, &need);
  return k == 0 ? 1 : k;
}

size_t first_invalid(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    // ASCII runs are the common case: test 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = sequence_length(s, n, i);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

size_t incomplete_tail(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    if (is_cont(s[i])) continue;
    size_t need = 0;
    size_t k = valid_prefix(s, n, i, &need);
    return (need > 1 && k == back && back < need) ? back : 0;
  }
  return 0;
}

void append_repaired(std::string_view bytes, std::string& out) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size(), i = 0, run = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = sequence_length(s, n, i);
    if (len) {
      i += len;
      continue;
    }
    out.append(bytes.data() + run, i - run);
    out.append("\xEF\xBF\xBD");
    i += invalid_subpart_length(s, n, i);
    run = i;
  }
  out.append(bytes.data() + run, n - run);
}

size_t count_code_points(std::string_view text) {
  size_t count = 0;
  for (unsigned char c : text) count += !is_cont(c);
  return count;
}

namespace {

// A code point NFC leaves as it is whatever surrounds it, and that nothing before it can absorb: a starter
// (combining class 0) with no canonical decomposition that is not the second half of any composition.
// Text splits into independently normalizable stretches right before such a character.
bool is_stable_starter(utf8proc_int32_t cp) {
  if (cp < 0x300) return true;
  if (cp >= 0x1100 && cp <= 0x11FF) return false;  // conjoining jamo compose into Hangul syllables
  // Precomposed syllables are NFC and nothing before them absorbs them (a following T jamo is unstable
  // itself, and its stretch starts at the syllable).
  if (cp >= 0xAC00 && cp <= 0xD7A3) return true;
  const utf8proc_property_t* p = utf8proc_get_property(cp);
  if (p->combining_class != 0 || p->decomp_seqindex != UINT16_MAX) return false;
  // Marks with combining class 0 can still be the second half of a composition (e.g. U+0BBE).
  return p->category != UTF8PROC_CATEGORY_MN && p->category != UTF8PROC_CATEGORY_MC &&
         p->category != UTF8PROC_CATEGORY_ME;
}

// Decodes the code point at s[i] (valid UTF-8), returning its length.
size_t decode_at(const unsigned char* s, size_t n, size_t i, utf8proc_int32_t* cp) {
  if (s[i] < 0x80) {
    *cp = s[i];
    return 1;
  }
  utf8proc_ssize_t len = utf8proc_iterate(s + i, static_cast<utf8proc_ssize_t>(n - i), cp);
  if (len <= 0) throw Error("NFC normalization: invalid UTF-8");
  return static_cast<size_t>(len);
}

}  // namespace

bool nfc_quick_yes(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    // Lead bytes up to 0xCB are code points below U+0300: always stable starters.
    if (c < 0xCC) {
      i += c < 0x80 ? 1 : 2;
      continue;
    }
    utf8proc_int32_t cp = 0;
    i += decode_at(s, n, i, &cp);
    if (!is_stable_starter(cp)) return false;
  }
  return true;
}

std::string nfc_reference(std::string_view text) {
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                      static_cast<utf8proc_ssize_t>(text.size()), &result,
                                      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (len < 0) {
    throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(len));
  }
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> holder(result, &std::free);
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
}

namespace {

constexpr uint32_t kHfInert[] = {
#include "models/tokenizer/hf_nfc_inert.inc"
};

bool hf_inert(uint32_t cp) { return std::binary_search(std::begin(kHfInert), std::end(kHfInert), cp); }

}  // namespace

void append_nfc_slow(std::string_view text, std::string& out) {
  // HF's NFC treats the marks in kHfInert as unknown starters: nothing reorders or composes across them
  // and they stay as they are, so NFC applies to the stretches between them independently.
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0, run = 0;
  while (i < n) {
    if (s[i] < 0xDF) {
      i += s[i] < 0x80 ? 1 : 2;
      continue;
    }
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t len = utf8proc_iterate(s + i, static_cast<utf8proc_ssize_t>(n - i), &cp);
    if (len <= 0) throw Error("NFC normalization: invalid UTF-8");
    if (hf_inert(static_cast<uint32_t>(cp))) {
      if (i > run) out.append(nfc_reference(text.substr(run, i - run)));
      out.append(text.substr(i, static_cast<size_t>(len)));
      run = i + static_cast<size_t>(len);
    }
    i += static_cast<size_t>(len);
  }
  if (run < n) out.append(nfc_reference(text.substr(run)));
}

void append_nfc(std::string_view text, std::string& out) {
  // Copy stable stretches as they are and run the full algorithm only from the stable starter before an
  // unstable character up to the next stable starter; NFC never crosses such a boundary.
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  size_t copied = 0;      // text[0, copied) is already in out
  size_t last_stable = 0;  // start of the last stable starter seen (a boundary)
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0xCC) {
      last_stable = i;
      i += c < 0x80 ? 1 : 2;
      continue;
    }
    utf8proc_int32_t cp = 0;
    size_t len = decode_at(s, n, i, &cp);
    if (is_stable_starter(cp)) {
      last_stable = i;
      i += len;
      continue;
    }
    size_t begin = std::max(last_stable, copied);
    size_t end = i + len;
    while (end < n) {
      size_t l = decode_at(s, n, end, &cp);
      if (is_stable_starter(cp)) break;
      end += l;
    }
    out.append(text.substr(copied, begin - copied));
    append_nfc_slow(text.substr(begin, end - begin), out);
    copied = end;
    last_stable = end;
    i = end;
  }
  out.append(text.substr(copied));
}

}  // namespace qt::tok::utf8
