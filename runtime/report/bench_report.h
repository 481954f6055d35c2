#pragma once
// A benchmark report rendered to REPORT.md and SVG plots from its measurements (report_json.h). Rendering
// only reads a BenchReport, so a recorded file renders the same anywhere (qbench --render FILE --report DIR).
// Every string of the report reaches Markdown and SVG escaped (text_escape.h), and plot file names are made
// from validated fields only (a weight type's name and integers).
// Times of "emu" reports are the emulator's and say nothing about a GPU; the report says so.
#include <map>
#include <string>

#include "runtime/report/report_json.h"

namespace qt::report {

struct RenderedReport {
  std::string markdown;                      // REPORT.md
  std::map<std::string, std::string> plots;  // file name under plots/ -> SVG text
};

RenderedReport render_report(const BenchReport& report);
// Writes DIR/REPORT.md, DIR/report.json (report_to_json) and DIR/plots/*.svg (DIR is created).
void write_report(const BenchReport& report, const std::string& dir);

}  // namespace qt::report
