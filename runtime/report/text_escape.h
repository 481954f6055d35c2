#pragma once
// Untrusted text (any string of a report.json) made safe for the formats a report is written in. Each
// function returns text that displays as the input does, on one line: control characters, line breaks
// and NUL become a space or U+FFFD, and bytes that are not UTF-8 become U+FFFD, so no string can start a
// heading, a table column, raw HTML or an ill-formed SVG.
#include <cstddef>
#include <string>

namespace qt::report {

// Inline Markdown (a table cell, a heading, a list item): every character Markdown or HTML reads as markup
// is backslash-escaped.
std::string markdown_text(const std::string& s);
// XML character data and attribute values (SVG): tab and line breaks become spaces, the characters XML 1.0
// forbids U+FFFD.
std::string xml_escape(const std::string& s);
// At most `max_bytes` bytes of `s`, cut between characters, "..." marking the cut.
std::string shorten(const std::string& s, size_t max_bytes);

}  // namespace qt::report
