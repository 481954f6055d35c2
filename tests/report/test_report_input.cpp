// A recorded report.json is input from anywhere: read against its schema with bounded size and nesting,
// every string escaped in REPORT.md and the SVGs, figures out of range refused, and only understood fields
// written back.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/paths.h"
#include "runtime/report/bench_report.h"
#include "runtime/report/report_json.h"
#include "runtime/report/text_escape.h"

using namespace std::string_literals;
using nlohmann::json;
using qt::report::report_from_json;

namespace {

json recorded() {
  std::ifstream in(qt::source_root() + "/tests/report/data/recorded-cuda.json");
  return json::parse(in);
}

qt::report::RenderedReport render(const json& j) { return qt::report::render_report(report_from_json(j, "report.json")); }

// Every string field the schema has, as it sits in the recorded report.
const char* const kStringFields[] = {
    "/generated",           "/command",
    "/device/name",         "/device/fingerprint",
    "/device/bandwidth_method", "/model/path",
    "/model/arch",          "/model/weight_type",
    "/tuned_cache",         "/kernels/0/what",
    "/kernels/0/variants/0/name", "/kernels/0/variants/1/detail",
    "/kernels/2/variants/2/unavailable", "/kernels/2/variants/3/name",
    "/end_to_end/0/name",   "/end_to_end/0/model",
    "/end_to_end/3/name",   "/end_to_end/3/unavailable",
    "/notes/0",
};

// Everything that has a meaning in Markdown, HTML or XML, and what breaks a line or a file.
const std::string kHostile = "x\n# injected heading\r\n| a | b |\n<script>alert(1)</script>"s + '\0' +
                             "<img src=x onerror=1> `code` [link](javascript:x) *em* _u_ &amp; \\| "
                             "\xe2\x80\xa8 ]]> \xef\xbf\xbf ~~s~~ ![i](x) 1. - + ---";

// The recorded report rendered with `field` set to a plain marker, and with it set to kHostile.
std::pair<qt::report::RenderedReport, qt::report::RenderedReport> benign_and_hostile(const char* field) {
  json benign = recorded(), hostile = recorded();
  benign[json::json_pointer(field)] = "MARKER";
  hostile[json::json_pointer(field)] = kHostile;
  return {render(benign), render(hostile)};
}

// The '|' that separate table cells (an escaped one is text).
size_t cell_separators(const std::string& line) {
  size_t n = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') ++i;
    else if (line[i] == '|') ++n;
  }
  return n;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Whether `s` has a '<' that Markdown could read as HTML (our own Markdown has none).
bool unescaped_angle(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '<') return true;
  }
  return false;
}

bool has_control_byte(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 && c != '\n') return true;
  return false;
}

size_t count(const std::string& s, char c) { return size_t(std::count(s.begin(), s.end(), c)); }

// A field of the recorded report set to a value the schema refuses, and what the refusal must say.
struct FieldCase {
  const char* pointer;
  json value;
  const char* needle;
};

// The refusal of the recorded report with the case's field set (the message names "x/report.json").
qt::Error refusal(const FieldCase& c) {
  json j = recorded();
  j[json::json_pointer(c.pointer)] = c.value;
  try {
    report_from_json(j, "x/report.json");
  } catch (const qt::Error& e) {
    return e;
  }
  return qt::Error("accepted", qt::kExitOk);
}

}  // namespace

TEST_CASE("A hostile string in any report field stays text in REPORT.md: no heading, column, HTML or line of its own") {
  for (const char* field : kStringFields) {
    INFO(field);
    const auto [benign, hostile] = benign_and_hostile(field);
    const std::vector<std::string> b = lines_of(benign.markdown), h = lines_of(hostile.markdown);
    const std::string& md = hostile.markdown;
    REQUIRE(h.size() == b.size());
    for (size_t i = 0; i < h.size(); ++i) {
      INFO(h[i]);
      CHECK(cell_separators(h[i]) == cell_separators(b[i]));
      CHECK(h[i].substr(0, 2) == b[i].substr(0, 2));  // the same kind of line: heading, item, table row, quote
    }
    CHECK_FALSE(unescaped_angle(md));
    CHECK_FALSE(has_control_byte(md));
  }
}

TEST_CASE("A hostile string in any report field leaves every SVG well-formed with the same elements") {
  for (const char* field : kStringFields) {
    INFO(field);
    const auto [benign, hostile] = benign_and_hostile(field);
    const auto &b = benign.plots, &h = hostile.plots;
    REQUIRE(h.size() == b.size());
    for (const auto& [file, svg] : h) {
      INFO(file);
      REQUIRE(b.count(file) == 1);
      CHECK(count(svg, '<') == count(b.at(file), '<'));  // no element or CDATA of the string's making
      CHECK(count(svg, '>') == count(b.at(file), '>'));
      CHECK_FALSE(has_control_byte(svg));                  // XML 1.0 has no NUL, not even as &#0;
      CHECK(svg.find("\xef\xbf\xbf") == std::string::npos);  // nor U+FFFF
    }
  }
  // The series and category names are shown, escaped.
  json j = recorded();
  j["end_to_end"][0]["name"] = "a<b & \"c\"";
  CHECK(render(j).plots.at("end-to-end.svg").find("a&lt;b &amp; &quot;c&quot;") != std::string::npos);
}

TEST_CASE("Markdown escaping keeps ordinary names readable and makes markup inert") {
  using qt::report::markdown_text;
  CHECK(markdown_text("AWQ_INT4 q_proj, o_proj: awq_gemv warps=8 (tuned)") ==
        "AWQ_INT4 q_proj, o_proj: awq_gemv warps=8 (tuned)");
  CHECK(markdown_text("a | b") == "a \\| b");
  CHECK(markdown_text("<b>&amp;</b>") == "\\<b\\>\\&amp;\\</b\\>");
  CHECK(markdown_text("_em_ *em* `c` [l](u)") == "\\_em\\_ \\*em\\* \\`c\\` \\[l\\](u)");
  CHECK(markdown_text("line\nbreak\r\nand\ttab") == "line break  and tab");
  CHECK(markdown_text("- item") == "\\- item");
  CHECK(markdown_text("12. item") == "12\\. item");
  CHECK(markdown_text("  # not a heading  ") == "\\# not a heading");
  CHECK(markdown_text("nul\0here"s) == "nul\xef\xbf\xbdhere");
  CHECK(markdown_text("bad \xff byte") == "bad \xef\xbf\xbd byte");
}

TEST_CASE("SVG escaping replaces what XML 1.0 forbids, NUL included") {
  using qt::report::xml_escape;
  CHECK(xml_escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  CHECK(xml_escape("nul\0\x01\x1f"s) == "nul\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(xml_escape("tab\tline\r\n") == "tab line  ");
  CHECK(xml_escape("\xef\xbf\xbe\xef\xbf\xbf") == "\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(xml_escape("\xc3") == "\xef\xbf\xbd");
}

TEST_CASE("A long reason is shortened between characters, never inside one") {
  const std::string s = std::string(136, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9";  // 136 + three 2-byte characters
  const std::string cut = qt::report::shorten(s, 140);
  CHECK(cut.size() <= 140);
  CHECK(cut == std::string(136, 'a') + "...");
  CHECK(qt::report::shorten("short", 140) == "short");
}

TEST_CASE("A report field of the wrong type is refused in one line naming the file and the field") {
  const FieldCase cases[] = {
      {"/schema", 1, "schema must be a string"},
      {"/generated", 5, "generated must be a string"},
      {"/device", json::array(), "device must be an object"},
      {"/device/kind", 3, "device.kind must be a string"},
      {"/device/name", nullptr, "device.name must be a string"},
      {"/device/bandwidth_gbps", "fast", "device.bandwidth_gbps must be a number"},
      {"/model", "x", "model must be an object"},
      {"/model/path", 5, "model.path must be a string"},
      {"/model/layers", "36", "model.layers must be an integer"},
      {"/tuned_cache", 7, "tuned_cache must be a string"},
      {"/kernels", json::object(), "kernels must be an array"},
      {"/kernels/0", "row", "kernels[0] must be an object"},
      {"/kernels/0/type", 1, "kernels[0].type must be a string"},
      {"/kernels/0/N", "4096", "kernels[0].N must be an integer"},
      {"/kernels/0/G", true, "kernels[0].G must be an integer"},
      {"/kernels/0/variants", 3, "kernels[0].variants must be an array"},
      {"/kernels/0/variants/0/seconds", "8us", "kernels[0].variants[0].seconds must be a number"},
      {"/kernels/0/variants/0/bytes", json::array(), "kernels[0].variants[0].bytes must be a number"},
      {"/kernels/0/variants/0/detail", 5, "kernels[0].variants[0].detail must be a string"},
      {"/end_to_end/0/prefill_tok_s", json::array(), "end_to_end[0].prefill_tok_s must be an object"},
      {"/end_to_end/0/prefill_tok_s/128", "fast", "end_to_end[0].prefill_tok_s[128] must be a number"},
      {"/end_to_end/0/decode_steps", "128", "end_to_end[0].decode_steps must be an integer"},
      {"/end_to_end/0/memory_mb", json::object(), "end_to_end[0].memory_mb must be a number"},
      {"/notes", "one", "notes must be an array"},
      {"/notes/0", 5, "notes[0] must be a string"},
  };
  for (const FieldCase& c : cases) {
    INFO(c.pointer);
    const qt::Error e = refusal(c);
    const std::string m = e.what();
    CHECK(m.rfind("x/report.json: ", 0) == 0);
    CHECK(m.find(c.needle) != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
    CHECK(e.exit_code() == qt::kExitBadInput);
  }
}

TEST_CASE("A report figure out of its range is refused instead of rendering a wrong number") {
  const FieldCase cases[] = {
      {"/kernels/0/G", 1e300, "kernels[0].G must be an integer in 0..4194304, got 1e+300"},
      {"/kernels/0/M", 1.5, "kernels[0].M must be an integer in 1..65536, got 1.5"},
      {"/kernels/0/M", 0, "kernels[0].M must be an integer"},
      {"/kernels/0/N", -4096, "kernels[0].N must be an integer"},
      {"/kernels/0/K", 18446744073709551615ull, "kernels[0].K must be an integer"},
      {"/kernels/0/variants/0/seconds", 0, "kernels[0].variants[0].seconds must be a number in"},
      {"/kernels/0/variants/0/seconds", 1e-300, "kernels[0].variants[0].seconds"},
      {"/kernels/0/variants/0/bytes", -1, "kernels[0].variants[0].bytes"},
      {"/device/bandwidth_gbps", 1e-300, "device.bandwidth_gbps"},
      {"/end_to_end/0/decode_tok_s", 1e300, "end_to_end[0].decode_tok_s"},
      {"/end_to_end/0/decode_steps", 0, "end_to_end[0].decode_steps"},
      {"/model/layers", 100000, "model.layers"},
      {"/device/kind", "tpu", "device.kind must be cuda, emu or cpu"},
      {"/kernels/0/type", "x/../../../ESCAPED", "kernels[0].type must be a weight type"},
      {"/kernels/0/variants/2/unavailable", "", "kernels[0].variants[2].unavailable must say why"},
  };
  for (const FieldCase& c : cases) {
    INFO(c.pointer << " = " << c.value.dump());
    CHECK_THAT(refusal(c).what(), Catch::Contains(c.needle));
  }
  for (const char* key : {"0", "-5", "1e3", "007", "12x", "99999999999", ""}) {
    INFO(key);
    json j = recorded();
    j["end_to_end"][0]["prefill_tok_s"][key] = 5;
    CHECK_THROWS_WITH(report_from_json(j, "report.json"), Catch::Contains("end_to_end[0].prefill_tok_s has"));
  }
}

TEST_CASE("A report too large or nested too deep is refused before it is built") {
  // 60,000 levels inside notes: the file that once became 7.2 GB.
  const std::string deep = R"({"schema": "qtune-bench-report/1", "notes": )" + std::string(60000, '[') +
                           std::string(60000, ']') + "}";
  CHECK_THROWS_WITH(qt::report::parse_report(deep, "deep.json"), Catch::Contains("deep.json: nested more than"));
  const std::string big(size_t{17} << 20, ' ');
  CHECK_THROWS_WITH(qt::report::parse_report(big, "big.json"), Catch::Contains("big.json: ") && Catch::Contains("MiB"));
  json many = recorded();
  for (int i = 0; i < 5000; ++i) many["kernels"].push_back(many["kernels"][0]);
  CHECK_THROWS_WITH(report_from_json(many, "many.json"), Catch::Contains("kernels has 5003 entries, more than"));
  CHECK_THROWS_WITH(qt::report::parse_report("{\"schema\": ", "cut.json"), Catch::Contains("cut.json: not JSON"));
  CHECK_THROWS_WITH(qt::report::parse_report("[]", "list.json"), Catch::Contains("list.json: the top level must be an object"));
}

TEST_CASE("report.json is written back from the understood fields only, and the plots stay in the report folder") {
  const std::string dir = qt::binary_root() + "/tests/report-understood-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  json j = recorded();
  j["evil"] = {{"deeper", {{"and", "deeper"}}}};
  j["kernels"][0]["extra"] = "x";
  j["device"]["secret"] = 1;
  qt::report::write_report(report_from_json(j, "report.json"), dir);
  std::ifstream in(dir + "/report.json");
  const json back = json::parse(in);
  CHECK(back == recorded());
  // Plot file names come from the weight type and integers: the only files are REPORT.md, report.json and
  // plots/*.svg inside the folder.
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    ++files;
    const std::string rel = std::filesystem::relative(e.path(), dir).string();
    CHECK((rel == "REPORT.md" || rel == "report.json" || (rel.rfind("plots/", 0) == 0 && rel.ends_with(".svg"))));
  }
  CHECK(files == 2 + 3);
  std::filesystem::remove_all(dir);
}
