#include "runtime/report/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "common/error.h"
#include "runtime/report/svg_plot.h"
#include "runtime/report/text_escape.h"

namespace qt::report {
namespace {

// Wide enough for any double in any of the formats below, so no figure is ever cut short.
std::string fmt(const char* f, double v) {
  char b[400];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string pct(double v) { return fmt("%.0f%%", 100 * v); }

// A reason short enough for a table cell; the whole text stays in report.json.
std::string cell_text(const std::string& s) { return markdown_text(shorten(s, 140)); }

const Variant* find_variant(const KernelRow& r, const std::string& name) {
  for (const Variant& v : r.variants)
    if (v.name == name && v.unavailable.empty()) return &v;
  return nullptr;
}

std::string shape_key(const KernelRow& r) {
  return r.type + " N=" + std::to_string(r.n) + " K=" + std::to_string(r.k) + " G=" + std::to_string(r.g);
}

// The plot's file name: made of a weight type's name and integers only (report_json.cpp checks the type).
std::string plot_file(const KernelRow& r) {
  return "linear-" + r.type + "-" + std::to_string(r.n) + "x" + std::to_string(r.k) + "-g" + std::to_string(r.g) + ".svg";
}

double flops(const KernelRow& r) { return 2.0 * double(r.m) * double(r.n) * double(r.k); }

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 0 : std::exp(s / double(v.size()));
}

struct Goal {
  std::string goal, measured, verdict;
};

std::vector<Goal> goals(const BenchReport& rep) {
  std::vector<Goal> g;
  const std::string& kind = rep.device_kind;
  const std::optional<double>& bw = rep.bandwidth_gbps;
  auto verdict = [&](bool have, bool met) {
    if (kind != "cuda") return std::string("not applicable (") + kind + " report)";
    if (!have) return std::string("not measured");
    return std::string(met ? "met" : "NOT met");
  };
  // AWQ GEMV at M=1 >= 85% of the measured bandwidth: the worst shape counts.
  double worst = INFINITY;
  for (const KernelRow& r : rep.kernels)
    if (r.m == 1 && r.type == "AWQ_INT4" && bw)
      if (const Variant* t = find_variant(r, "tuned"); t && t->bytes)
        worst = std::min(worst, *t->bytes / t->seconds / 1e9 / *bw);
  g.push_back({"AWQ GEMV at M=1 >= 85% of the measured bandwidth (worst shape)",
               std::isfinite(worst) ? pct(worst) : "-", verdict(std::isfinite(worst), worst >= 0.85)});
  std::vector<double> sp;
  for (const KernelRow& r : rep.kernels)
    if (const Variant *t = find_variant(r, "tuned"), *d = find_variant(r, "default"); t && d)
      sp.push_back(d->seconds / t->seconds);
  g.push_back({"tuned geomean >= 1.3x the default", sp.empty() ? "-" : fmt("%.2fx", geomean(sp)),
               verdict(!sp.empty(), geomean(sp) >= 1.3)});
  std::vector<double> vs;
  for (const KernelRow& r : rep.kernels)
    if (const Variant *t = find_variant(r, "tuned"), *c = find_variant(r, "fp16 cublas"); r.m >= 256 && t && c)
      vs.push_back(c->seconds / t->seconds);
  g.push_back({"GEMM at M >= 256 >= 0.9x FP16 cuBLAS (geomean)", vs.empty() ? "-" : fmt("%.2fx", geomean(vs)),
               verdict(!vs.empty(), geomean(vs) >= 0.9)});
  double frac = -1;
  std::string which = "tuned";
  for (const EndToEnd& e : rep.end_to_end) {
    if (e.name.size() > 6 && e.name.ends_with(" tuned") && e.decode_tok_s && e.decode_bytes_per_token && bw) {
      frac = *e.decode_tok_s * *e.decode_bytes_per_token / (*bw * 1e9);
      which = e.name;
    }
  }
  g.push_back({"decode end to end (" + markdown_text(which) + ") >= 70% of the bandwidth roofline",
               frac >= 0 ? pct(frac) : "-", verdict(frac >= 0, frac >= 0.7)});
  return g;
}

std::string header(const BenchReport& rep) {
  const std::string name = markdown_text(rep.device_name);
  std::string md = "# qtune benchmark report: " + name + "\n\n";
  md += "- generated " + markdown_text(rep.generated.value_or("?")) + " by " + markdown_text(rep.command.value_or("?")) + "\n";
  md += "- device: " + name + " (" + rep.device_kind + "), fingerprint " + markdown_text(rep.fingerprint.value_or("?")) + "\n";
  md += "- measured bandwidth: " + (rep.bandwidth_gbps ? fmt("%.1f GB/s", *rep.bandwidth_gbps) : std::string("not measured")) +
        (rep.bandwidth_method ? " (" + markdown_text(*rep.bandwidth_method) + ")" : "") + "\n";
  md += "- model: " + markdown_text(rep.model_path) + " (" + markdown_text(rep.model_arch.value_or("?")) + ", " +
        std::to_string(rep.model_layers.value_or(0)) + " layers, " + markdown_text(rep.model_weight_type.value_or("?")) + ")\n";
  md += "- tuned cache: " + (rep.tuned_cache ? markdown_text(*rep.tuned_cache) : std::string("none (tuned = default)")) + "\n\n";
  if (rep.device_kind == "emu")
    md += "> These times are the CPU emulator's. They check that the measurement and the report work, and say "
          "nothing about any GPU's speed.\n\n";
  md += "## Goals\n\n| goal | measured | verdict |\n|---|---|---|\n";
  for (const Goal& g : goals(rep)) md += "| " + g.goal + " | " + g.measured + " | " + g.verdict + " |\n";
  return md + "\n";
}

// Linear layers: one section and one plot per shape.
void linear_sections(const BenchReport& rep, RenderedReport& out) {
  std::vector<std::string> shapes;
  std::map<std::string, std::vector<const KernelRow*>> rows_of;
  for (const KernelRow& r : rep.kernels) {
    auto& rows = rows_of[shape_key(r)];
    if (rows.empty()) shapes.push_back(shape_key(r));
    rows.push_back(&r);
  }
  std::string& md = out.markdown;
  if (!shapes.empty())
    md += std::string("## Linear layers\n\nTime is the median over repetitions") +
          (rep.device_kind == "cuda" ? " timed with CUDA events, the L2 cache flushed between them" : "") +
          ". GB/s counts the bytes each variant must move (weights in its own format, activations in and out); "
          "the last column is how much slower each variant is than tuned.\n\n";
  for (const std::string& key : shapes) {
    std::vector<const KernelRow*>& of = rows_of[key];
    std::stable_sort(of.begin(), of.end(), [](const KernelRow* a, const KernelRow* b) { return a->m < b->m; });
    md += "### " + markdown_text(key) + (of[0]->what.empty() ? "" : " (" + markdown_text(of[0]->what) + ")") + "\n\n";
    md += "![TFLOP/s by batch](plots/" + plot_file(*of[0]) + ")\n\n";
    md += "| M | variant | time (us) | TFLOP/s | GB/s | % of bandwidth | tuned speedup | kernel |\n"
          "|---|---|---|---|---|---|---|---|\n";
    std::vector<std::string> names;
    for (const KernelRow* r : of) {
      const Variant* tuned = find_variant(*r, "tuned");
      for (const Variant& v : r->variants) {
        if (std::find(names.begin(), names.end(), v.name) == names.end()) names.push_back(v.name);
        md += "| " + std::to_string(r->m) + " | " + cell_text(v.name) + " | ";
        if (!v.unavailable.empty()) {
          md += "- | - | - | - | - | " + cell_text(v.unavailable) + " |\n";
          continue;
        }
        const std::optional<double> gbps = v.bytes ? std::optional<double>(*v.bytes / v.seconds / 1e9) : std::nullopt;
        md += fmt("%.2f", v.seconds * 1e6) + " | " + fmt("%.3f", flops(*r) / v.seconds / 1e12) + " | " +
              (gbps ? fmt("%.1f", *gbps) : "-") + " | " + (gbps && rep.bandwidth_gbps ? pct(*gbps / *rep.bandwidth_gbps) : "-") +
              " | " + (tuned ? fmt("%.2fx", v.seconds / tuned->seconds) : "-") + " | " + cell_text(v.detail) + " |\n";
      }
    }
    md += "\n";
    LinePlot plot;
    plot.title = key + ": TFLOP/s by batch rows";
    plot.x_label = "M (tokens per call)";
    plot.y_label = "TFLOP/s";
    for (const std::string& n : names) {
      Series s;
      s.name = n;
      for (const KernelRow* r : of)
        if (const Variant* v = find_variant(*r, n)) s.points.push_back({double(r->m), flops(*r) / v->seconds / 1e12});
      plot.series.push_back(s);
    }
    out.plots[plot_file(*of[0])] = render_line_plot(plot);
  }
}

// End to end: a row per variant, a column per prompt length measured (ppN) and the decode run (tgN).
void end_to_end_section(const BenchReport& rep, RenderedReport& out) {
  if (rep.end_to_end.empty()) return;
  std::set<int64_t> prompts;
  int64_t steps = 0;
  for (const EndToEnd& e : rep.end_to_end) {
    if (!e.unavailable.empty()) continue;
    for (const auto& [len, rate] : e.prefill_tok_s) prompts.insert(len);
    steps = std::max(steps, e.decode_steps);
  }
  const std::string tg = "tg" + std::to_string(steps);
  std::string& md = out.markdown;
  md += "## End to end\n\nTokens per second. " + tg + " is " + std::to_string(steps) +
        " decode steps after the prompt; the roofline is the measured bandwidth over the weight bytes one decode "
        "step reads.\n\n![end to end](plots/end-to-end.svg)\n\n| variant |";
  for (int64_t p : prompts) md += " pp" + std::to_string(p) + " tok/s |";
  md += " " + tg + " tok/s | roofline tok/s | decode / roofline | memory (MB) |\n|---|";
  for (size_t i = 0; i < prompts.size() + 4; ++i) md += "---|";
  md += "\n";
  BarPlot bars;
  bars.title = "End to end (tokens per second)";
  bars.y_label = "tok/s";
  for (int64_t p : prompts) bars.series.push_back("pp" + std::to_string(p));
  bars.series.push_back(tg);
  bars.values.assign(bars.series.size(), {});
  auto cell = [](std::optional<double> v, const char* f) { return v ? fmt(f, *v) : std::string("-"); };
  for (const EndToEnd& e : rep.end_to_end) {
    if (!e.unavailable.empty()) {
      md += "| " + cell_text(e.name) + " | " + cell_text(e.unavailable) + " |\n";
      continue;
    }
    const std::optional<double> roof = rep.bandwidth_gbps && e.decode_bytes_per_token
                                           ? std::optional<double>(*rep.bandwidth_gbps * 1e9 / *e.decode_bytes_per_token)
                                           : std::nullopt;
    md += "| " + cell_text(e.name) + " |";
    bars.categories.push_back(e.name);
    size_t col = 0;
    for (int64_t p : prompts) {
      const auto it = e.prefill_tok_s.find(p);
      const std::optional<double> v = it == e.prefill_tok_s.end() ? std::nullopt : std::optional<double>(it->second);
      md += " " + cell(v, "%.1f") + " |";
      bars.values[col++].push_back(v.value_or(0));
    }
    bars.values[col].push_back(e.decode_tok_s.value_or(0));
    md += " " + cell(e.decode_tok_s, "%.2f") + " | " + cell(roof, "%.1f") + " | " +
          (roof && e.decode_tok_s ? pct(*e.decode_tok_s / *roof) : "-") + " | " + cell(e.memory_mb, "%.0f") + " |\n";
  }
  md += "\n";
  out.plots["end-to-end.svg"] = render_bar_plot(bars);
}

}  // namespace

RenderedReport render_report(const BenchReport& rep) {
  RenderedReport out;
  out.markdown = header(rep);
  linear_sections(rep, out);
  end_to_end_section(rep, out);
  if (!rep.notes.empty()) {
    out.markdown += "## Notes\n\n";
    for (const std::string& n : rep.notes) out.markdown += "- " + markdown_text(n) + "\n";
    out.markdown += "\n";
  }
  return out;
}

void write_report(const BenchReport& report, const std::string& dir) {
  const RenderedReport r = render_report(report);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "plots", ec);
  if (ec) throw Error("cannot create report folder " + dir + ": " + ec.message());
  auto write = [&](const fs::path& p, const std::string& content) {
    std::ofstream f(p, std::ios::binary);
    f << content;
    if (!f.flush()) throw Error("cannot write " + p.string(), kExitFailure);
  };
  write(fs::path(dir) / "REPORT.md", r.markdown);
  // Bytes that are not UTF-8 (a path measured on this machine) become U+FFFD rather than stop the dump.
  write(fs::path(dir) / "report.json",
        report_to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  for (const auto& [name, svg] : r.plots) write(fs::path(dir) / "plots" / name, svg);
}

}  // namespace qt::report
