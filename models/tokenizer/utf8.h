#pragma once
// UTF-8 helpers for the tokenizer (internal): validation, Python/Rust-compatible repair of invalid bytes,
// and NFC with a fast path that skips utf8proc for text NFC cannot change.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qt::tok::utf8 {

// Length of the well-formed sequence starting at s[i], or 0 if the bytes there are not one
// (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF, no truncation).
size_t sequence_length(const unsigned char* s, size_t n, size_t i);
// Length of the maximal subpart of an ill-formed sequence at s[i] (>= 1): the bytes replaced by one U+FFFD.
size_t invalid_subpart_length(const unsigned char* s, size_t n, size_t i);
// Offset of the first byte of the first ill-formed sequence, or n if all is valid.
size_t first_invalid(std::string_view text);
// Number of trailing bytes of `bytes` that are a proper prefix of a well-formed sequence (0..3): the part a
// streaming decoder must hold back because later bytes may complete it.
size_t incomplete_tail(std::string_view bytes);
void append_repaired(std::string_view bytes, std::string& out);
// Code point count (text must be valid UTF-8).
size_t count_code_points(std::string_view text);

// Appends NFC(text) to out as Hugging Face tokenizers computes it (current Unicode data, except the marks
// HF's older tables do not know, listed in hf_nfc_inert.inc); text must be valid UTF-8.
void append_nfc(std::string_view text, std::string& out);
// True when NFC(text) == text is guaranteed without running the full algorithm.
bool nfc_quick_yes(std::string_view text);
// The same without the fast path, for cross-checking it in tests and the fuzzer.
void append_nfc_slow(std::string_view text, std::string& out);
// Plain utf8proc NFC (current Unicode), the building block of the two above.
std::string nfc_reference(std::string_view text);

}  // namespace qt::tok::utf8
