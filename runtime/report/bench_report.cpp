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

namespace qt::report {
namespace {

using nlohmann::json;

// Field access with errors that name the path of what is missing.
const json& field(const json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error("report JSON: " + where + " has no '" + key + "'");
  return j.at(key);
}
std::string text(const json& j, const std::string& key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) throw Error("report JSON: " + where + "." + key + " must be a string");
  return v.get<std::string>();
}
double number(const json& j, const std::string& key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_number()) throw Error("report JSON: " + where + "." + key + " must be a number");
  return v.get<double>();
}
// A positive number, or nullopt when the field is absent or null.
std::optional<double> maybe(const json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  const double v = number(j, key, where);
  if (!(v > 0) || !std::isfinite(v)) throw Error("report JSON: " + where + "." + key + " must be positive");
  return v;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A reason short enough for a table cell; the whole text stays in report.json.
std::string short_text(const std::string& s) {
  std::string one = s;
  std::replace(one.begin(), one.end(), '|', '/');
  std::replace(one.begin(), one.end(), '\n', ' ');
  return one.size() <= 140 ? one : one.substr(0, 137) + "...";
}

std::string pct(double v) { return fmt("%.0f%%", 100 * v); }

struct Variant {
  std::string name, detail, unavailable;
  double seconds = 0, bytes = 0;
};

struct KernelRow {
  std::string type, what;
  int64_t n = 0, k = 0, g = 0, m = 0;
  std::vector<Variant> variants;
  const Variant* find(const std::string& name) const {
    for (const Variant& v : variants)
      if (v.name == name && v.unavailable.empty()) return &v;
    return nullptr;
  }
  std::string shape_key() const {
    return type + " N=" + std::to_string(n) + " K=" + std::to_string(k) + " G=" + std::to_string(g);
  }
  std::string file_key() const {
    return "linear-" + type + "-" + std::to_string(n) + "x" + std::to_string(k) + "-g" + std::to_string(g) + ".svg";
  }
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

std::vector<KernelRow> read_kernels(const json& data) {
  std::vector<KernelRow> rows;
  if (!data.contains("kernels")) return rows;
  const json& ks = data.at("kernels");
  if (!ks.is_array()) throw Error("report JSON: 'kernels' must be an array");
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string where = "kernels[" + std::to_string(i) + "]";
    const json& k = ks[i];
    KernelRow r;
    r.type = text(k, "type", where);
    r.what = k.contains("what") ? text(k, "what", where) : "";
    r.n = int64_t(number(k, "N", where)), r.k = int64_t(number(k, "K", where));
    r.g = int64_t(number(k, "G", where)), r.m = int64_t(number(k, "M", where));
    if (r.n <= 0 || r.k <= 0 || r.m <= 0) throw Error("report JSON: " + where + " needs positive M, N and K");
    const json& vs = field(k, "variants", where);
    if (!vs.is_array()) throw Error("report JSON: " + where + ".variants must be an array");
    for (size_t j = 0; j < vs.size(); ++j) {
      const std::string w = where + ".variants[" + std::to_string(j) + "]";
      Variant v;
      v.name = text(vs[j], "name", w);
      if (vs[j].contains("unavailable")) {
        v.unavailable = text(vs[j], "unavailable", w);
      } else {
        const auto seconds = maybe(vs[j], "seconds", w);
        if (!seconds) throw Error("report JSON: " + w + " has neither 'seconds' nor 'unavailable'");
        v.seconds = *seconds;
        v.bytes = maybe(vs[j], "bytes", w).value_or(0);
      }
      if (vs[j].contains("detail")) v.detail = text(vs[j], "detail", w);
      r.variants.push_back(v);
    }
    rows.push_back(r);
  }
  return rows;
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 0 : std::exp(s / double(v.size()));
}

struct Goal {
  std::string goal, measured, verdict;
};

std::vector<Goal> goals(const std::string& kind, const std::vector<KernelRow>& rows, const json& e2e,
                        std::optional<double> bw) {
  std::vector<Goal> g;
  const bool gpu = kind == "cuda";
  auto verdict = [&](bool have, bool met) {
    if (!gpu) return std::string("not applicable (") + kind + " report)";
    if (!have) return std::string("not measured");
    return std::string(met ? "met" : "NOT met");
  };
  // AWQ GEMV at M=1 >= 85% of the measured bandwidth: the worst shape counts.
  double worst = INFINITY;
  for (const KernelRow& r : rows)
    if (r.m == 1 && r.type == "AWQ_INT4" && bw)
      if (const Variant* t = r.find("tuned"); t && t->bytes > 0) worst = std::min(worst, t->bytes / t->seconds / 1e9 / *bw);
  g.push_back({"AWQ GEMV at M=1 >= 85% of the measured bandwidth (worst shape)",
               std::isfinite(worst) ? pct(worst) : "-", verdict(std::isfinite(worst), worst >= 0.85)});
  std::vector<double> sp;
  for (const KernelRow& r : rows)
    if (const Variant *t = r.find("tuned"), *d = r.find("default"); t && d) sp.push_back(d->seconds / t->seconds);
  g.push_back({"tuned geomean >= 1.3x the default", sp.empty() ? "-" : fmt("%.2fx", geomean(sp)),
               verdict(!sp.empty(), geomean(sp) >= 1.3)});
  std::vector<double> vs;
  for (const KernelRow& r : rows)
    if (const Variant *t = r.find("tuned"), *c = r.find("fp16 cublas"); r.m >= 256 && t && c)
      vs.push_back(c->seconds / t->seconds);
  g.push_back({"GEMM at M >= 256 >= 0.9x FP16 cuBLAS (geomean)", vs.empty() ? "-" : fmt("%.2fx", geomean(vs)),
               verdict(!vs.empty(), geomean(vs) >= 0.9)});
  double frac = -1;
  std::string which = "tuned";
  for (const json& e : e2e) {
    const std::string n = e.value("name", "");
    if (n.size() > 6 && n.ends_with(" tuned") && e.contains("decode_tok_s") && e.contains("decode_bytes_per_token") && bw) {
      frac = e.at("decode_tok_s").get<double>() * e.at("decode_bytes_per_token").get<double>() / (*bw * 1e9);
      which = n;
    }
  }
  g.push_back({"decode end to end (" + which + ") >= 70% of the bandwidth roofline", frac >= 0 ? pct(frac) : "-",
               verdict(frac >= 0, frac >= 0.7)});
  return g;
}

}  // namespace

RenderedReport render_report(const json& data) {
  if (!data.is_object()) throw Error("report JSON: the top level must be an object");
  const std::string schema = text(data, "schema", "report");
  if (schema != kReportSchema)
    throw Error("report JSON: schema '" + schema + "' is not " + std::string(kReportSchema));
  const json& dev = field(data, "device", "report");
  const std::string kind = text(dev, "kind", "device"), name = text(dev, "name", "device");
  if (kind != "cuda" && kind != "emu" && kind != "cpu")
    throw Error("report JSON: device.kind must be cuda, emu or cpu (got '" + kind + "')");
  const std::optional<double> bw = maybe(dev, "bandwidth_gbps", "device");
  const json& model = field(data, "model", "report");
  const std::vector<KernelRow> rows = read_kernels(data);
  const json e2e = data.contains("end_to_end") ? data.at("end_to_end") : json::array();
  if (!e2e.is_array()) throw Error("report JSON: 'end_to_end' must be an array");

  RenderedReport out;
  std::string& md = out.markdown;
  md += "# qtune benchmark report: " + name + "\n\n";
  md += "- generated " + data.value("generated", std::string("?")) + " by `" + data.value("command", std::string("?")) + "`\n";
  md += "- device: " + name + " (" + kind + "), fingerprint `" + dev.value("fingerprint", std::string("?")) + "`\n";
  md += "- measured bandwidth: " + (bw ? fmt("%.1f GB/s", *bw) : std::string("not measured")) +
        (dev.contains("bandwidth_method") ? " (" + text(dev, "bandwidth_method", "device") + ")" : "") + "\n";
  md += "- model: " + text(model, "path", "model") + " (" + model.value("arch", std::string("?")) + ", " +
        std::to_string(model.value("layers", 0)) + " layers, " + model.value("weight_type", std::string("?")) + ")\n";
  md += "- tuned cache: " + (data.contains("tuned_cache") && data.at("tuned_cache").is_string()
                                 ? "`" + data.at("tuned_cache").get<std::string>() + "`"
                                 : std::string("none (tuned = default)")) + "\n\n";
  if (kind == "emu")
    md += "> These times are the CPU emulator's. They check that the measurement and the report work, and say "
          "nothing about any GPU's speed.\n\n";

  md += "## Goals\n\n| goal | measured | verdict |\n|---|---|---|\n";
  for (const Goal& g : goals(kind, rows, e2e, bw)) md += "| " + g.goal + " | " + g.measured + " | " + g.verdict + " |\n";
  md += "\n";

  // Linear layers, one section and one plot per shape.
  std::vector<std::string> shapes;
  for (const KernelRow& r : rows)
    if (std::find(shapes.begin(), shapes.end(), r.shape_key()) == shapes.end()) shapes.push_back(r.shape_key());
  if (!shapes.empty())
    md += std::string("## Linear layers\n\nTime is the median over repetitions") +
          (kind == "cuda" ? " timed with CUDA events, the L2 cache flushed between them" : "") +
          ". GB/s counts the bytes each variant must move (weights in its own format, activations in and out); "
          "the last column is how much slower each variant is than tuned.\n\n";
  for (const std::string& key : shapes) {
    std::vector<const KernelRow*> of;
    for (const KernelRow& r : rows)
      if (r.shape_key() == key) of.push_back(&r);
    std::sort(of.begin(), of.end(), [](const KernelRow* a, const KernelRow* b) { return a->m < b->m; });
    md += "### " + key + (of[0]->what.empty() ? "" : " (" + of[0]->what + ")") + "\n\n";
    md += "![TFLOP/s by batch](plots/" + of[0]->file_key() + ")\n\n";
    md += "| M | variant | time (us) | TFLOP/s | GB/s | % of bandwidth | tuned speedup | kernel |\n"
          "|---|---|---|---|---|---|---|---|\n";
    std::vector<std::string> names;
    for (const KernelRow* r : of) {
      const Variant* tuned = r->find("tuned");
      for (const Variant& v : r->variants) {
        if (std::find(names.begin(), names.end(), v.name) == names.end()) names.push_back(v.name);
        md += "| " + std::to_string(r->m) + " | " + v.name + " | ";
        if (!v.unavailable.empty()) {
          md += "- | - | - | - | - | " + short_text(v.unavailable) + " |\n";
          continue;
        }
        const double gbps = v.bytes / v.seconds / 1e9;
        md += fmt("%.2f", v.seconds * 1e6) + " | " + fmt("%.3f", r->flops() / v.seconds / 1e12) + " | " +
              (v.bytes > 0 ? fmt("%.1f", gbps) : "-") + " | " + (v.bytes > 0 && bw ? pct(gbps / *bw) : "-") + " | " +
              (tuned ? fmt("%.2fx", v.seconds / tuned->seconds) : "-") + " | " + v.detail + " |\n";
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
        if (const Variant* v = r->find(n)) s.points.push_back({double(r->m), r->flops() / v->seconds / 1e12});
      plot.series.push_back(s);
    }
    out.plots[of[0]->file_key()] = render_line_plot(plot);
  }

  if (!e2e.empty()) {
    // Columns: every prompt length measured (ppN) and the decode run (tgN).
    std::set<int64_t> prompts;
    int64_t steps = 0;
    for (size_t i = 0; i < e2e.size(); ++i) {
      const std::string where = "end_to_end[" + std::to_string(i) + "]";
      if (e2e[i].contains("unavailable")) continue;
      const json& pf = field(e2e[i], "prefill_tok_s", where);
      if (!pf.is_object()) throw Error("report JSON: " + where + ".prefill_tok_s must map prompt lengths to tok/s");
      for (const auto& [len, v] : pf.items()) {
        int64_t n = 0;
        try {
          n = std::stoll(len);
        } catch (const std::exception&) {
          throw Error("report JSON: " + where + ".prefill_tok_s has a key '" + len + "' that is not a prompt length");
        }
        if (n <= 0 || !v.is_number()) throw Error("report JSON: " + where + ".prefill_tok_s[" + len + "] is not a rate");
        prompts.insert(n);
      }
      steps = std::max<int64_t>(steps, int64_t(number(e2e[i], "decode_steps", where)));
    }
    const std::string tg = "tg" + std::to_string(steps);
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
    for (size_t i = 0; i < e2e.size(); ++i) {
      const json& e = e2e[i];
      const std::string where = "end_to_end[" + std::to_string(i) + "]";
      const std::string vname = text(e, "name", where);
      if (e.contains("unavailable")) {
        md += "| " + vname + " | " + text(e, "unavailable", where) + " |\n";
        continue;
      }
      const auto dec = maybe(e, "decode_tok_s", where);
      const auto bytes = maybe(e, "decode_bytes_per_token", where), mem = maybe(e, "memory_mb", where);
      const std::optional<double> roof = bw && bytes ? std::optional<double>(*bw * 1e9 / *bytes) : std::nullopt;
      auto cell = [](std::optional<double> v, const char* f) { return v ? fmt(f, *v) : std::string("-"); };
      md += "| " + vname + " |";
      bars.categories.push_back(vname);
      size_t col = 0;
      for (int64_t p : prompts) {
        const std::optional<double> v = maybe(e.at("prefill_tok_s"), std::to_string(p), where + ".prefill_tok_s");
        md += " " + cell(v, "%.1f") + " |";
        bars.values[col++].push_back(v.value_or(0));
      }
      bars.values[col].push_back(dec.value_or(0));
      md += " " + cell(dec, "%.2f") + " | " + cell(roof, "%.1f") + " | " + (roof && dec ? pct(*dec / *roof) : "-") +
            " | " + cell(mem, "%.0f") + " |\n";
    }
    md += "\n";
    out.plots["end-to-end.svg"] = render_bar_plot(bars);
  }
  if (data.contains("notes") && data.at("notes").is_array() && !data.at("notes").empty()) {
    md += "## Notes\n\n";
    for (const json& n : data.at("notes"))
      if (n.is_string()) md += "- " + n.get<std::string>() + "\n";
    md += "\n";
  }
  return out;
}

void write_report(const json& data, const std::string& dir) {
  const RenderedReport r = render_report(data);  // validate before touching the folder
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "plots", ec);
  if (ec) throw Error("cannot create report folder " + dir + ": " + ec.message());
  auto write = [&](const fs::path& p, const std::string& content) {
    std::ofstream f(p, std::ios::binary);
    f << content;
    if (!f.flush()) throw Error("cannot write " + p.string());
  };
  write(fs::path(dir) / "REPORT.md", r.markdown);
  write(fs::path(dir) / "report.json", data.dump(2) + "\n");
  for (const auto& [name, svg] : r.plots) write(fs::path(dir) / "plots" / name, svg);
}

}  // namespace qt::report
