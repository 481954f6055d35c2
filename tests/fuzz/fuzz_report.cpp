// Fuzz entry for report.json as qbench --render reads it: the bounded parse and schema, the Markdown and SVG
// rendering, and the write-back of the understood fields, which must read back as the same report.
#include "runtime/report/bench_report.h"
#include "runtime/report/report_json.h"
#include "tests/fuzz/fuzz_support.h"

namespace qt::fuzz {

using namespace detail;

void report_json(const uint8_t* data, size_t size) {
  expect_clean("report_json", [&] {
    const report::BenchReport r = report::parse_report(text_of(data, size), "report.json");
    const report::RenderedReport rendered = report::render_report(r);
    const std::string written = report::report_to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    // What write_report keeps must render as what was read: nothing understood is lost or changed.
    if (report::render_report(report::parse_report(written, "written report.json")).markdown != rendered.markdown)
      throw FuzzFinding("report_json: the written report.json renders differently from the one read");
  });
}

}  // namespace qt::fuzz
