#include "runtime/report/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "common/error.h"
#include "common/number_format.h"
#include "runtime/report/report_json.h"
#include "runtime/report/svg_plot.h"
#include "runtime/report/text_escape.h"

namespace qt::report {
namespace {

std::string pct(double v) { return format_number("%.0f%%", 100 * v); }

// A reason short enough for a table cell; the whole text stays in report.json.
std::string cell_text(const std::string& s) { return markdown_text(shorten(s, 140)); }

// A row's (linear, MoE or attention) measured variant by name; null when absent or not measured.
template <class Row>
const Variant* find_variant(const Row& r, const std::string& name) {
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
  std::string best_default = "-";  // the goal's figure with the best family default where it beats the dispatch
};

// ---- each family's default point beside the dispatch (linear rows) ----

// The family a linear row's variant times at its default point: "<family> default" variants, and "default"
// (the runtime's default, whose family is the first word of its detail, unless its route is a cuBLASLt
// baseline). "" for any other variant.
std::string default_family(const Variant& v) {
  if (v.name == "default")
    return v.detail.find("cuBLASLt") != std::string::npos ? "" : v.detail.substr(0, v.detail.find(' '));
  return family_of_default(v.name);
}

// The kernel a variant ran: its detail without the trailing "(source)" ("awq_gemv warps=4").
std::string kernel_of(const Variant& v) { return v.detail.substr(0, v.detail.rfind(" (")); }

// The fastest family default point measured in a row, or null when the row has none. A default point that is
// the dispatch's own kernel (the dispatch fell back to it) is the same kernel timed twice, not a faster one.
// `family` names it as the goals' cells do: the family, with the parameter of a report_ab neighbour
// ("awq_frag_wgmma_gemm kif=2").
const Variant* best_family_default(const KernelRow& r, const Variant* dispatch, std::string& family) {
  const Variant* best = nullptr;
  for (const Variant& v : r.variants) {
    if (!v.unavailable.empty() || (dispatch && kernel_of(v) == kernel_of(*dispatch))) continue;
    const std::string f = default_family(v);
    if (f.empty() || (best && v.seconds >= best->seconds)) continue;
    best = &v;
    family = f;
    if (const std::string ab = neighbour_of(v.name, family_default_name(f)); !ab.empty()) family += " " + ab;
  }
  return best;
}

// For a goal judged on the dispatch ("tuned") of some rows: those rows' figures with the best family default
// put in where it is faster, and which families those were ("awq_frag_stream_gemv on 4 of 5 rows").
struct WithBestDefault {
  std::vector<std::pair<const KernelRow*, const Variant*>> rows;  // each row and its faster of the two
  std::map<std::string, int> beaten_by;  // family -> rows where its default beats the dispatch
  std::string families(size_t of) const {
    std::vector<std::pair<int, std::string>> order;
    for (const auto& [f, n] : beaten_by) order.push_back({-n, f});
    std::sort(order.begin(), order.end());
    std::string out;
    for (size_t i = 0; i < order.size(); ++i)
      out += (i ? ", " : "") + markdown_text(order[i].second) + " on " + std::to_string(-order[i].first);
    return out + " of " + std::to_string(of) + " rows";
  }
};

WithBestDefault with_best_default(const std::vector<const KernelRow*>& rows) {
  WithBestDefault w;
  for (const KernelRow* r : rows) {
    const Variant* t = find_variant(*r, "tuned");
    std::string family;
    const Variant* d = best_family_default(*r, t, family);
    if (d && (!t || d->seconds < t->seconds)) {
      ++w.beaten_by[family];
      w.rows.push_back({r, d});
    } else {
      w.rows.push_back({r, t});
    }
  }
  return w;
}

// ---- the MoE grouped GEMM rows ----

const char* const kOneByOne = "cublas one by one";

// The grouped GEMM the runtime runs by default: the frag layout's where the report measured it (sm_90, where
// the runtime repacks experts into it: kernels_src/moe_wgmma's frag_experts_by_default), else the file layout's.
const Variant* runtime_tuned(const MoeRow& r) {
  const Variant* frag = find_variant(r, "frag tuned");
  return frag ? frag : find_variant(r, "tuned");
}

std::string op_label(const MoeRow& r) { return r.op == "moe_gate_up" ? "gate/up" : "down"; }

// Gate and up are two products of the routed rows, down one.
double flops(const MoeRow& r) { return (r.op == "moe_gate_up" ? 4.0 : 2.0) * double(r.t * r.topk) * double(r.n) * double(r.k); }

// The token counts for the MoE goals.
constexpr int64_t kMoeGoalTokens[] = {512, 4096};

// Each op's rows at the goal's token counts, or why the report cannot judge the goal: a dense model, or
// buckets without 512 or 4096.
std::vector<const MoeRow*> moe_goal_rows(const BenchReport& rep, std::string& missing) {
  std::vector<const MoeRow*> rows;
  if (!rep.moe_grouped || rep.moe_grouped->rows.empty()) {
    missing = "no MoE rows";
    return rows;
  }
  for (const char* op : {"moe_gate_up", "moe_down"})
    for (int64_t t : kMoeGoalTokens) {
      const MoeRow* found = nullptr;
      for (const MoeRow& r : rep.moe_grouped->rows)
        if (r.op == op && r.t == t) found = &r;
      if (found) rows.push_back(found);
      else missing = "the buckets lack 512 or 4096";
    }
  return rows;
}

// The worst of a ratio over the goal's rows ("1.85x (worst: gate/up T=4096)"), or "" when a row lacks either
// time.
template <class Ratio>
std::string worst_ratio(const std::vector<const MoeRow*>& rows, bool smallest, Ratio ratio, double& worst) {
  const MoeRow* at = nullptr;
  for (const MoeRow* r : rows) {
    const std::optional<double> v = ratio(*r);
    if (!v) return "";
    if (!at || (smallest ? *v < worst : *v > worst)) worst = *v, at = r;
  }
  return at ? format_number("%.2fx", worst) + " (worst: " + op_label(*at) + " T=" + std::to_string(at->t) + ")" : "";
}

void moe_goals(const BenchReport& rep, const std::function<std::string(bool, bool)>& verdict, std::vector<Goal>& g) {
  std::string missing;
  const std::vector<const MoeRow*> rows = moe_goal_rows(rep, missing);
  double worst = 0;
  std::string m = missing.empty() ? worst_ratio(rows, true, [](const MoeRow& r) -> std::optional<double> {
    const Variant *t = runtime_tuned(r), *b = find_variant(r, kOneByOne);
    if (!t || !b) return std::nullopt;
    return b->seconds / t->seconds;
  }, worst) : "";
  const std::string why_b = missing.empty() ? "no cuBLASLt baseline" : missing;
  g.push_back({"MoE grouped GEMM (512 and 4096 tokens) faster than experts one by one on cuBLASLt",
               m.empty() ? "not measured (" + why_b + ")" : m, verdict(!m.empty(), worst > 1.0)});
  m = missing.empty() ? worst_ratio(rows, false, [](const MoeRow& r) -> std::optional<double> {
    const Variant* t = find_variant(r, "tuned");
    if (!t || !r.tune_best || !r.tune_best->unavailable.empty()) return std::nullopt;
    return t->seconds / r.tune_best->seconds;
  }, worst) : "";
  g.push_back({"MoE grouped GEMM (512 and 4096 tokens) tuned within 5% of the best of the space (from the tune)",
               m.empty() ? (missing.empty() ? std::string("no tune") : "not measured (" + missing + ")") : m,
               verdict(!m.empty(), worst <= 1.05)});
}

// ---- the end-to-end goals ----

// The best of a figure per quantized weight type over the end-to-end variants, in the report's order. A variant's
// type is its name's first word ("AWQ tuned + PDL" is AWQ); FP16, the predequantized model, is no quantized
// type's. `why` is the first unmeasured variant's reason: its own, else `missing`.
struct TypeBest {
  std::string type, variant, why;
  std::optional<double> value;
};

std::vector<TypeBest> best_per_type(const BenchReport& rep, const std::function<std::optional<double>(const EndToEnd&)>& figure,
                                    const std::string& missing) {
  std::vector<TypeBest> out;
  for (const EndToEnd& e : rep.end_to_end) {
    const std::string type = e.name.substr(0, e.name.find(' '));
    if (type == "FP16") continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const TypeBest& b) { return b.type == type; });
    if (it == out.end()) it = out.insert(out.end(), TypeBest{type, "", "", std::nullopt});
    const std::optional<double> v = e.unavailable.empty() ? figure(e) : std::nullopt;
    if (!v) {
      if (it->why.empty()) it->why = e.unavailable.empty() ? missing : e.unavailable;
      continue;
    }
    if (!it->value || *v > *it->value) it->value = v, it->variant = e.name;
  }
  return out;
}

// Decode end to end >= 70% of the bandwidth roofline for each quantized weight type (issue 26: AWQ and Q8_0),
// >= 40% for an MoE model: each type judged on its fastest variant of the runtime (default or tuned, fused
// norms, PDL, with or without the graph: whatever a user can run), named in the row.
void decode_goals(const BenchReport& rep, const std::function<std::string(bool, bool)>& verdict, std::vector<Goal>& g) {
  const bool moe = rep.model_arch && *rep.model_arch == "qwen3-moe";
  const double goal = moe ? 0.4 : 0.7;
  const std::string bar = std::string(" >= ") + (moe ? "40%" : "70%") + " of the bandwidth roofline";
  const std::vector<TypeBest> types = best_per_type(rep, [&](const EndToEnd& e) -> std::optional<double> {
    if (!e.decode_tok_s || !e.decode_bytes_per_token || !rep.bandwidth_gbps) return std::nullopt;
    return *e.decode_tok_s * *e.decode_bytes_per_token / (*rep.bandwidth_gbps * 1e9);
  }, "");
  if (types.empty()) g.push_back({"decode end to end" + bar, "-", verdict(false, false)});
  for (const TypeBest& b : types) {
    if (!b.value) {
      g.push_back({"decode end to end, " + markdown_text(b.type) + bar,
                   b.why.empty() ? "-" : "not measured (" + markdown_text(shorten(b.why, 80)) + ")", verdict(false, false)});
      continue;
    }
    g.push_back({"decode end to end, " + markdown_text(b.type) + ", its fastest variant (" + markdown_text(b.variant) + ")" + bar,
                 pct(*b.value), verdict(true, *b.value >= goal)});
  }
}

// Prefill end to end (pp512) with quantized weights >= 0.9x the same model predequantized to FP16 (issue 27),
// each quantized type on its fastest variant that prefills from those weights, against the FP16 variant.
void prefill_goal(const BenchReport& rep, const std::function<std::string(bool, bool)>& verdict, std::vector<Goal>& g) {
  auto pp512 = [](const EndToEnd& e) -> std::optional<double> {
    const auto it = e.prefill_tok_s.find(512);
    if (!e.unavailable.empty() || it == e.prefill_tok_s.end()) return std::nullopt;
    if (e.name.find(kPrefillCopySuffix) != std::string::npos) return std::nullopt;
    return it->second;
  };
  std::optional<double> fp16;
  for (const EndToEnd& e : rep.end_to_end)
    if (e.name == "FP16") fp16 = pp512(e);
  const std::vector<TypeBest> types = best_per_type(rep, pp512, "no 512-token prompt measured");
  const std::string bar = " >= 0.9x the model predequantized to FP16";
  if (types.empty()) g.push_back({"prefill pp512 with quantized weights" + bar, "-", verdict(false, false)});
  for (const TypeBest& b : types) {
    if (!b.value || !fp16) {
      const std::string why = !fp16 ? "no FP16 pp512" : b.why;
      g.push_back({"prefill pp512, " + markdown_text(b.type) + bar,
                   "not measured (" + markdown_text(shorten(why, 80)) + ")", verdict(false, false)});
      continue;
    }
    const double r = *b.value / *fp16;
    g.push_back({"prefill pp512, " + markdown_text(b.type) + ", its fastest variant (" + markdown_text(b.variant) + ")" + bar,
                 format_number("%.2fx", r), verdict(true, r >= 0.9)});
  }
}

// ---- the attention decode rows ----

// Flash-decoding at 4K and 32K context >= 70% of the measured bandwidth for the KV read (issue 26, item 4): the
// worst of the two contexts, on the runtime's choice as a decode step runs it (tuned in a chain: back to back,
// every launch's cache cold), with the same timed alone beside it, whose events also hold a launch's fixed cost;
// reports without the chain are judged on the launch timed alone. The last cell: the best split count alone.
void attention_goal(const BenchReport& rep, const std::function<std::string(bool, bool)>& verdict, std::vector<Goal>& g) {
  const std::string title = "attention decode at 4K and 32K context >= 70% of the bandwidth for the KV read (worst context)";
  std::vector<const AttentionRow*> rows;
  if (rep.attention_decode)
    for (const AttentionRow& r : rep.attention_decode->rows)
      if (r.context == 4096 || r.context == 32768) rows.push_back(&r);
  if (rows.size() < 2 || !rep.bandwidth_gbps) {
    g.push_back({title, "-", verdict(false, false)});
    return;
  }
  auto worst = [&](const std::string& name) {
    double w = INFINITY;
    for (const AttentionRow* r : rows) {
      const Variant* v = find_variant(*r, name);
      if (!v || !v->bytes) return -1.0;
      w = std::min(w, *v->bytes / v->seconds / 1e9 / *rep.bandwidth_gbps);
    }
    return w;
  };
  const double alone = worst("tuned"), chain = worst(chained_name("tuned")), best = worst("best splits");
  const double judged = chain >= 0 ? chain : alone;
  std::string measured = judged >= 0 ? pct(judged) : "-";
  if (chain >= 0 && alone >= 0) measured += " in a chain (" + pct(alone) + " timed alone)";
  Goal goal{title, measured, verdict(judged >= 0, judged >= 0.7)};
  // The best split count is timed alone: beside the tuned choice timed alone, said so where the chain judges.
  if (best > alone) goal.best_default = pct(best) + (chain >= 0 ? " timed alone (best splits; tuned alone " + pct(alone) + ")" : " (best splits)");
  g.push_back(goal);
}

std::vector<Goal> goals(const BenchReport& rep) {
  std::vector<Goal> g;
  const std::string& kind = rep.device_kind;
  const std::optional<double>& bw = rep.bandwidth_gbps;
  auto verdict = [&](bool have, bool met) {
    if (kind != "cuda") return std::string("not applicable (") + kind + " report)";
    if (!have) return std::string("not measured");
    return std::string(met ? "met" : "NOT met");
  };
  // Each goal on the linear rows is judged on the dispatch ("tuned"); its last cell gives the same figure with
  // the best family default put in on the rows where it beats the dispatch, and names those families.
  auto best_default_cell = [](const WithBestDefault& w, const std::string& figure) {
    return w.beaten_by.empty() || figure.empty() ? std::string("-") : figure + " (" + w.families(w.rows.size()) + ")";
  };
  // Issue 26's GEMV goals at M=1, judged on the worst row of each: every quantized type >= 75% of the measured
  // bandwidth on the large shapes (N x K of at least 12288 x 4096: the 8B's gate/up and down), AWQ also >= 50% on
  // 4096 x 4096 and >= 3x faster than FP16 cuBLASLt on those shapes, and >= 2.5x at M = 2..16.
  auto share = [&](const KernelRow&, const Variant& v) -> std::optional<double> {
    if (!v.bytes || !bw) return std::nullopt;
    return *v.bytes / v.seconds / 1e9 / *bw;
  };
  auto slower_by = [](const std::string& baseline) {
    return [baseline](const KernelRow& r, const Variant& v) -> std::optional<double> {
      const Variant* b = find_variant(r, baseline);
      return b ? std::optional<double>(b->seconds / v.seconds) : std::nullopt;
    };
  };
  // The smallest of `figure` over `rows` on the dispatch, and with the best family default put in; `text` writes
  // a figure. A row without the figure leaves the goal unmeasured.
  // `dispatch`: the variant judged, "tuned" (timed alone, beside the best family default) or "tuned in a chain"
  // (as a decode step runs it; the family defaults are timed alone only, so its last cell is "-").
  auto worst_goal = [&](const std::string& title, const std::pair<std::vector<const KernelRow*>, size_t>& kept,
                        const std::function<std::optional<double>(const KernelRow&, const Variant&)>& figure,
                        const std::function<std::string(double)>& text, double threshold,
                        const std::string& dispatch = "tuned") {
    const std::vector<const KernelRow*>& rows = kept.first;
    const std::string left_out =
        kept.second ? "; " + std::to_string(kept.second) + " row" + (kept.second > 1 ? "s" : "") + " without the baseline" : "";
    auto worst_of = [&](const std::vector<std::pair<const KernelRow*, const Variant*>>& pairs,
                        const KernelRow** at) -> std::optional<double> {
      std::optional<double> worst;
      for (const auto& [r, v] : pairs) {
        const std::optional<double> x = v ? figure(*r, *v) : std::nullopt;
        if (!x) return std::nullopt;
        if (!worst || *x < *worst) worst = x, *at = r;
      }
      return worst;
    };
    if (rows.empty()) {
      g.push_back({title, "not measured (no such row" + left_out + ")", verdict(false, false)});
      return;
    }
    std::vector<std::pair<const KernelRow*, const Variant*>> tuned;
    for (const KernelRow* r : rows) tuned.push_back({r, find_variant(*r, dispatch)});
    const KernelRow* at = nullptr;
    const std::optional<double> worst = worst_of(tuned, &at);
    const bool alone = dispatch == "tuned";
    const WithBestDefault best = alone ? with_best_default(rows) : WithBestDefault{};
    const KernelRow* best_at = nullptr;
    const std::optional<double> worst_best = alone ? worst_of(best.rows, &best_at) : std::nullopt;
    const bool one_m = std::all_of(rows.begin(), rows.end(), [&](const KernelRow* r) { return r->m == rows[0]->m; });
    const std::string where = at ? " (worst: " + std::to_string(at->n) + " x " + std::to_string(at->k) +
                                       (one_m ? "" : " at M=" + std::to_string(at->m)) + ")"
                                 : "";
    g.push_back({title, worst ? text(*worst) + (rows.size() > 1 ? where : "") + (left_out.empty() ? "" : " (" + left_out.substr(2) + ")") : "-",
                 verdict(worst.has_value(), worst && *worst >= threshold),
                 best_default_cell(best, worst_best ? text(*worst_best) : "")});
  };
  auto times = [](double x) { return format_number("%.2fx", x); };
  // A linear row's weight type as the goals name it: AWQ_INT4 is the issues' AWQ.
  auto type_label = [](const std::string& t) { return t == "AWQ_INT4" ? std::string("AWQ") : markdown_text(t); };
  std::vector<std::string> types;  // the quantized types with linear rows, in the report's order
  for (const KernelRow& r : rep.kernels)
    if (r.type != "F16" && std::find(types.begin(), types.end(), r.type) == types.end()) types.push_back(r.type);
  auto rows_where = [&](const std::function<bool(const KernelRow&)>& keep) {
    std::vector<const KernelRow*> out;
    for (const KernelRow& r : rep.kernels)
      if (keep(r)) out.push_back(&r);
    return out;
  };
  // Rows that lack `baseline` (not measured on this device) are left out of a goal against it, and named.
  auto with_baseline = [&](const std::vector<const KernelRow*>& rows, const std::string& baseline) {
    std::vector<const KernelRow*> kept;
    for (const KernelRow* r : rows)
      if (find_variant(*r, baseline)) kept.push_back(r);
    return std::pair{kept, rows.size() - kept.size()};
  };
  constexpr int64_t kLarge = int64_t{12288} * 4096;
  // The GEMV goals twice: timed alone between two events (a launch's fixed cost inside, and the best family
  // default beside), then, where the report has them, as a decode step runs them ("in a chain": back to back,
  // weights cold, FP16 cuBLASLt likewise). A 25 MB GEMV moves its weights in about 6 us on an H200, which
  // the fixed cost of a launch timed alone nearly doubles.
  const bool chains = std::any_of(rep.kernels.begin(), rep.kernels.end(),
                                  [](const KernelRow& r) { return find_variant(r, chained_name("tuned")) != nullptr; });
  for (const std::string& t : types) {
    const std::string name = type_label(t);
    const auto large = rows_where([&](const KernelRow& r) {
      return r.type == t && r.m == 1 && r.n * r.k >= kLarge && r.what != "lm_head";
    });
    const auto square = rows_where([&](const KernelRow& r) { return r.type == t && r.m == 1 && r.n == 4096 && r.k == 4096; });
    std::vector<const KernelRow*> three = large;
    three.insert(three.end(), square.begin(), square.end());
    const auto few_rows = rows_where([&](const KernelRow& r) { return r.type == t && r.m >= 2 && r.m <= 16; });
    for (const bool chain : {false, true}) {
      if (chain && !chains) continue;
      const std::string dispatch = chain ? chained_name("tuned") : "tuned";
      const std::string fp16 = chain ? chained_name("fp16 cublas") : "fp16 cublas";
      const std::string how = chain ? ", in a chain" : "";
      worst_goal(name + " GEMV at M=1 >= 75% of the measured bandwidth on the large shapes (N x K >= 12288 x 4096)" + how,
                 std::pair{large, size_t{0}}, share, pct, 0.75, dispatch);
      if (t != "AWQ_INT4") continue;
      worst_goal("AWQ GEMV at M=1 >= 50% of the measured bandwidth on 4096 x 4096" + how, std::pair{square, size_t{0}},
                 share, pct, 0.5, dispatch);
      worst_goal("AWQ GEMV at M=1 >= 3x faster than FP16 cuBLASLt on 4096 x 4096 and the large shapes" + how,
                 with_baseline(three, fp16), slower_by(fp16), times, 3.0, dispatch);
      worst_goal("AWQ at M=2..16 >= 2.5x faster than FP16 cuBLASLt (every shape)" + how, with_baseline(few_rows, fp16),
                 slower_by(fp16), times, 2.5, dispatch);
    }
  }
  // `ratio` of each row to its variant (the dispatch, or the faster family default), over the rows that have both.
  auto geomean_of = [](const std::vector<std::pair<const KernelRow*, const Variant*>>& rows,
                       const std::function<std::optional<double>(const KernelRow&, const Variant&)>& ratio) {
    std::vector<double> v;
    for (const auto& [r, t] : rows)
      if (t)
        if (const std::optional<double> x = ratio(*r, *t)) v.push_back(*x);
    return v;
  };
  // The tuned-over-default goal is the tuned model's: a companion model's rows (a --q8-model's, untuned) stay out.
  std::vector<const KernelRow*> all, gemm;
  for (const KernelRow& r : rep.kernels) {
    if (!rep.model_weight_type || r.type == *rep.model_weight_type || r.type == "F16") all.push_back(&r);
    if (r.m >= 256) gemm.push_back(&r);
  }
  auto tuned_rows = [](const std::vector<const KernelRow*>& rows) {
    std::vector<std::pair<const KernelRow*, const Variant*>> out;
    for (const KernelRow* r : rows) out.push_back({r, find_variant(*r, "tuned")});
    return out;
  };
  // "Variant `over` / tuned" over `rows` as a geomean goal, with the figure the best family defaults would give.
  auto ratio_goal = [&](const std::string& title, const std::vector<const KernelRow*>& rows, const char* over,
                        double threshold) {
    auto ratio = [over](const KernelRow& r, const Variant& t) -> std::optional<double> {
      const Variant* d = find_variant(r, over);
      return d ? std::optional<double>(d->seconds / t.seconds) : std::nullopt;
    };
    const std::vector<double> v = geomean_of(tuned_rows(rows), ratio);
    const WithBestDefault best = with_best_default(rows);
    const std::vector<double> v_best = geomean_of(best.rows, ratio);
    g.push_back({title, v.empty() ? "-" : format_number("%.2fx", geomean(v)), verdict(!v.empty(), geomean(v) >= threshold),
                 best_default_cell(best, v_best.empty() ? "" : format_number("%.2fx", geomean(v_best)))});
  };
  ratio_goal("tuned geomean >= 1.3x the default", all, "default", 1.3);
  ratio_goal("GEMM at M >= 256 >= 0.9x FP16 cuBLAS (geomean)", gemm, "fp16 cublas", 0.9);
  // Issue 27: whatever the dispatch picks is never slower than dequant + cuBLASLt, at any M.
  for (const std::string& t : types) {
    const auto rows = with_baseline(rows_where([&](const KernelRow& r) { return r.type == t; }), "dequant+cublas");
    std::set<int64_t> ms;
    for (const KernelRow* r : rows.first) ms.insert(r->m);
    worst_goal(type_label(t) +
                   ": the dispatch never slower than dequant + cuBLASLt, at any M" +
                   (ms.size() == 1 ? " (measured at M=" + std::to_string(*ms.begin()) + " only)" : ""),
               rows, slower_by("dequant+cublas"), times, 1.0);
  }
  prefill_goal(rep, verdict, g);
  decode_goals(rep, verdict, g);
  moe_goals(rep, verdict, g);
  attention_goal(rep, verdict, g);
  return g;
}

std::string header(const BenchReport& rep) {
  const std::string name = markdown_text(rep.device_name);
  std::string md = "# qtune benchmark report: " + name + "\n\n";
  md += "- generated " + markdown_text(rep.generated.value_or("?")) + " by " + markdown_text(rep.command.value_or("?")) + "\n";
  md += "- device: " + name + " (" + rep.device_kind + "), fingerprint " + markdown_text(rep.fingerprint.value_or("?")) + "\n";
  md += "- measured bandwidth: " + (rep.bandwidth_gbps ? format_number("%.1f GB/s", *rep.bandwidth_gbps) : std::string("not measured")) +
        (rep.bandwidth_method ? " (" + markdown_text(*rep.bandwidth_method) + ")" : "") + "\n";
  md += "- model: " + markdown_text(rep.model_path) + " (" + markdown_text(rep.model_arch.value_or("?")) + ", " +
        std::to_string(rep.model_layers.value_or(0)) + " layers, " + markdown_text(rep.model_weight_type.value_or("?")) + ")\n";
  md += "- tuned cache: " + (rep.tuned_cache ? markdown_text(*rep.tuned_cache) : std::string("none (tuned = default)")) + "\n\n";
  if (rep.device_kind == "emu")
    md += "> These times are the CPU emulator's. They check that the measurement and the report work, and say "
          "nothing about any GPU's speed.\n\n";
  md += "## Goals\n\nThe goals judge the runtime's dispatch (tuned, else each shape's default). The last column gives "
        "the same figure with the fastest family's default point put in on the rows where it beats the dispatch, "
        "and which families those are: the ones to make the default or to tune.\n\n"
        "| goal | measured | verdict | with the best family default |\n|---|---|---|---|\n";
  for (const Goal& g : goals(rep))
    md += "| " + g.goal + " | " + g.measured + " | " + g.verdict + " | " + g.best_default + " |\n";
  return md + "\n";
}

// A variant's cells after the batch column of a kernel table: name, time, TFLOP/s, GB/s, share of the
// bandwidth, how much slower than tuned, kernel (or why it was not measured); the line's end.
std::string variant_cells(const BenchReport& rep, double flop, const Variant& v, const Variant* tuned) {
  if (!v.unavailable.empty()) return cell_text(v.name) + " | - | - | - | - | - | " + cell_text(v.unavailable) + " |\n";
  std::string gbps = "-", share = "-";
  if (v.bytes) {
    const double rate = *v.bytes / v.seconds / 1e9;
    gbps = format_number("%.1f", rate);
    if (rep.bandwidth_gbps) share = pct(rate / *rep.bandwidth_gbps);
  }
  return cell_text(v.name) + " | " + format_number("%.2f", v.seconds * 1e6) + " | " + format_number("%.3f", flop / v.seconds / 1e12) + " | " +
         gbps + " | " + share + " | " + (tuned ? format_number("%.2fx", v.seconds / tuned->seconds) : "-") + " | " +
         cell_text(v.detail) + " |\n";
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
        md += "| " + std::to_string(r->m) + " | " + variant_cells(rep, flops(*r), v, tuned);
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

std::string moe_plot_file(const MoeRow& r) { return r.op == "moe_gate_up" ? "moe-gate-up.svg" : "moe-down.svg"; }

std::string us(const Variant* v) { return v ? format_number("%.2f", v->seconds * 1e6) : std::string("-"); }

// The per-bucket summary: each op at each T, its variants' times, the speedup over the experts one by one and
// the tuned time against the best of the tune.
void moe_summary(const std::vector<const MoeRow*>& rows, std::string& md) {
  md += "| op | T | rows per expert | tuned (us) | default (us) | frag tuned (us) | routed GEMV tuned (us) | "
        "cublas one by one (us) | cublas GEMMs only (us) | one by one / tuned | best of the tune (us) | "
        "tuned / best of the tune |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const MoeRow* r : rows) {
    const Variant *t = find_variant(*r, "tuned"), *b = find_variant(*r, kOneByOne);
    const Variant* best = r->tune_best && r->tune_best->unavailable.empty() ? &*r->tune_best : nullptr;
    std::string within = "no tune";
    if (best && t) {
      const double q = t->seconds / best->seconds;
      within = format_number("%.2fx", q) + (q <= 1.05 ? " (within 5%)" : " (not within 5%)");
    } else if (best) {
      within = "-";
    }
    md += "| " + op_label(*r) + " | " + std::to_string(r->t) + " | " + format_number("%.1f", double(r->t * r->topk) / double(r->e)) +
          " | " + us(t) + " | " + us(find_variant(*r, "default")) + " | " + us(find_variant(*r, "frag tuned")) + " | " +
          us(find_variant(*r, "routed GEMV tuned")) + " | " + us(b) + " | " +
          us(find_variant(*r, "cublas GEMMs only")) + " | " + (t && b ? format_number("%.2fx", b->seconds / t->seconds) : "-") +
          " | " + us(best) + " | " + within + " |\n";
  }
  md += "\n";
}

// MoE grouped GEMM: the method, the per-bucket summary, each op's variants with their kernels, a plot per op.
void moe_section(const BenchReport& rep, RenderedReport& out) {
  if (!rep.moe_grouped || rep.moe_grouped->rows.empty()) return;
  std::vector<const MoeRow*> rows;
  for (const MoeRow& r : rep.moe_grouped->rows) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const MoeRow* a, const MoeRow* b) {
    return a->op != b->op ? a->op == "moe_gate_up" : a->t < b->t;
  });
  const MoeRow& first = *rows[0];
  std::string& md = out.markdown;
  md += "## MoE grouped GEMM\n\n" + markdown_text(first.type) + " experts: " + std::to_string(first.e) + " experts, " +
        std::to_string(first.topk) + " per token; gate/up is N=" + std::to_string(first.op == "moe_gate_up" ? first.n : first.k) +
        " per matrix over K=" + std::to_string(first.op == "moe_gate_up" ? first.k : first.n) +
        ", down its transpose. T is tokens; each routes TOPK rows. Time is the median over repetitions" +
        (rep.device_kind == "cuda" ? " timed with CUDA events, the L2 cache flushed between them" : "") + ".\n\n";
  if (!rep.moe_grouped->method.empty()) md += markdown_text(rep.moe_grouped->method) + "\n\n";
  moe_summary(rows, md);
  for (const char* op : {"moe_gate_up", "moe_down"}) {
    std::vector<const MoeRow*> of;
    for (const MoeRow* r : rows)
      if (r->op == op) of.push_back(r);
    if (of.empty()) continue;
    md += "### " + op_label(*of[0]) + " (" + markdown_text(of[0]->what.empty() ? of[0]->op : of[0]->what) + ") N=" +
          std::to_string(of[0]->n) + " K=" + std::to_string(of[0]->k) + " G=" + std::to_string(of[0]->g) + "\n\n";
    md += "![TFLOP/s by tokens](plots/" + moe_plot_file(*of[0]) + ")\n\n";
    md += "| T | variant | time (us) | TFLOP/s | GB/s | % of bandwidth | tuned speedup | kernel |\n|---|---|---|---|---|---|---|---|\n";
    std::vector<std::string> names;
    for (const MoeRow* r : of) {
      const Variant* tuned = find_variant(*r, "tuned");
      for (const Variant& v : r->variants) {
        if (std::find(names.begin(), names.end(), v.name) == names.end()) names.push_back(v.name);
        md += "| " + std::to_string(r->t) + " | " + variant_cells(rep, flops(*r), v, tuned);
      }
    }
    md += "\n";
    LinePlot plot;
    plot.title = "MoE " + op_label(*of[0]) + ": TFLOP/s by tokens";
    plot.x_label = "T (tokens per call)";
    plot.y_label = "TFLOP/s";
    for (const std::string& n : names) {
      Series s;
      s.name = n;
      for (const MoeRow* r : of)
        if (const Variant* v = find_variant(*r, n)) s.points.push_back({double(r->t), flops(*r) / v->seconds / 1e12});
      plot.series.push_back(s);
    }
    out.plots[moe_plot_file(*of[0])] = render_line_plot(plot);
  }
}

// Attention decode: a row per context and variant, the KV read rate against the measured bandwidth.
void attention_section(const BenchReport& rep, RenderedReport& out) {
  if (!rep.attention_decode || rep.attention_decode->rows.empty()) return;
  const AttentionRow& first = rep.attention_decode->rows[0];
  std::string& md = out.markdown;
  md += "## Attention decode\n\nFlash-decoding of one token, " + std::to_string(first.heads) + " query heads over " +
        std::to_string(first.kv_heads) + " KV heads of dim " + std::to_string(first.head_dim) +
        ". Time is the median over repetitions" +
        (rep.device_kind == "cuda" ? " timed with CUDA events, the L2 cache flushed between them" : "") + ".\n\n";
  if (!rep.attention_decode->method.empty()) md += markdown_text(rep.attention_decode->method) + "\n\n";
  md += "| context | variant | time (us) | TFLOP/s | GB/s | % of bandwidth | tuned speedup | kernel |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const AttentionRow& r : rep.attention_decode->rows) {
    // q.k and p.v over the context for every query head: 2 flops per multiply-add.
    const double flop = 4.0 * double(r.heads) * double(r.head_dim) * double(r.context);
    for (const Variant& v : r.variants)
      md += "| " + std::to_string(r.context) + " | " + variant_cells(rep, flop, v, find_variant(r, "tuned"));
  }
  md += "\n";
}

// Launch cost: a row per grid and variant, microseconds per launch of a chain of back-to-back launches.
void launch_section(const BenchReport& rep, RenderedReport& out) {
  if (!rep.launch_cost || rep.launch_cost->rows.empty()) return;
  std::string& md = out.markdown;
  md += "## Launch cost\n\nMicroseconds per launch of one small kernel launched back to back.\n\n";
  if (!rep.launch_cost->method.empty()) md += markdown_text(rep.launch_cost->method) + "\n\n";
  md += "| grid | launches | variant | us per launch | detail |\n|---|---|---|---|---|\n";
  for (const LaunchRow& r : rep.launch_cost->rows)
    for (const Variant& v : r.variants) {
      md += "| " + std::to_string(r.blocks) + " x " + std::to_string(r.threads) + " | " + std::to_string(r.launches) +
            " | " + cell_text(v.name) + " | ";
      md += v.unavailable.empty() ? format_number("%.2f", v.seconds * 1e6) + " | " + cell_text(v.detail) + " |\n"
                                  : "- | " + cell_text(v.unavailable) + " |\n";
    }
  md += "\n";
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
  auto cell = [](std::optional<double> v, const char* f) { return v ? format_number(f, *v) : std::string("-"); };
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

// The A/Bs a family's defaults name (Param::report_ab): each pair of a default point and its neighbour one
// parameter away, "<family> default" (or the runtime's "default" where that family is the runtime's) against
// "<family> default <param>=<value>", and the MoE rows' "frag default" against "frag default <param>=<value>";
// per pair of family and parameter value, the geomean speedup of the neighbour over its base and how often it
// won. What the static model cannot weigh, measured on every run.
void ab_section(const BenchReport& rep, RenderedReport& out) {
  struct Pair {
    std::string row, base_us, ab_us;
    double speedup;
  };
  std::map<std::string, std::vector<Pair>> by_ab;  // "family param=value" -> its pairs
  auto add = [&](const std::string& family, const std::string& ab, const std::string& row, const Variant& base,
                 const Variant& v) {
    by_ab[family + " " + ab].push_back({row, format_number("%.2f", base.seconds * 1e6), format_number("%.2f", v.seconds * 1e6),
                                        base.seconds / v.seconds});
  };
  auto measured = [](const Variant* v) { return v && v->unavailable.empty() && v->seconds > 0; };
  for (const KernelRow& r : rep.kernels)
    for (const Variant& v : r.variants) {
      const std::string family = family_of_default(v.name);
      const std::string ab = family.empty() ? "" : neighbour_of(v.name, family_default_name(family));
      if (ab.empty() || !measured(&v)) continue;
      const Variant* base = find_variant(r, family_default_name(family));
      if (!base) {
        base = find_variant(r, "default");
        if (base && base->detail.rfind(family + " ", 0) != 0) base = nullptr;
      }
      if (!measured(base)) continue;
      add(family, ab,
          markdown_text(r.type) + " " + std::to_string(r.n) + " x " + std::to_string(r.k) + " at M=" + std::to_string(r.m),
          *base, v);
    }
  if (rep.moe_grouped)
    for (const MoeRow& r : rep.moe_grouped->rows) {
      const Variant* base = find_variant(r, "frag default");
      if (!measured(base)) continue;
      const std::string family = base->detail.substr(0, base->detail.find(' '));
      for (const Variant& v : r.variants)
        if (const std::string ab = neighbour_of(v.name, "frag default"); !ab.empty() && measured(&v))
          add(family, ab,
              markdown_text(r.op) + " " + std::to_string(r.n) + " x " + std::to_string(r.k) + " at T=" + std::to_string(r.t),
              *base, v);
    }
  if (by_ab.empty()) return;
  std::string& md = out.markdown;
  md += "## A/B of the default points\n\nEach family default beside its neighbour one parameter away, where the "
        "family's defaults name one (a choice the static model has no term for). Speedup: the default's time over "
        "the neighbour's; above 1, the neighbour is faster.\n\n| family | neighbour | rows | geomean speedup | "
        "neighbour faster |\n|---|---|---|---|---|\n";
  for (const auto& [key, pairs] : by_ab) {
    double log_sum = 0;
    int wins = 0;
    for (const Pair& p : pairs) log_sum += std::log(p.speedup), wins += p.speedup > 1;
    const size_t split = key.rfind(' ');
    md += "| " + markdown_text(key.substr(0, split)) + " | " + markdown_text(key.substr(split + 1)) + " | " +
          std::to_string(pairs.size()) + " | " + format_number("%.2fx", std::exp(log_sum / double(pairs.size()))) +
          " | " + std::to_string(wins) + " of " + std::to_string(pairs.size()) + " |\n";
  }
  md += "\n| family | neighbour | row | default (us) | neighbour (us) | speedup |\n|---|---|---|---|---|---|\n";
  for (const auto& [key, pairs] : by_ab) {
    const size_t split = key.rfind(' ');
    for (const Pair& p : pairs)
      md += "| " + markdown_text(key.substr(0, split)) + " | " + markdown_text(key.substr(split + 1)) + " | " + p.row +
            " | " + p.base_us + " | " + p.ab_us + " | " + format_number("%.2fx", p.speedup) + " |\n";
  }
  md += "\n";
}

}  // namespace

RenderedReport render_report(const BenchReport& rep) {
  RenderedReport out;
  out.markdown = header(rep);
  linear_sections(rep, out);
  moe_section(rep, out);
  attention_section(rep, out);
  launch_section(rep, out);
  ab_section(rep, out);
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
