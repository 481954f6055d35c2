#pragma once
// report.json: the measurements of one qbench --report run (schema "qtune-bench-report/1", below). A report
// is read against its schema into BenchReport, and written back from BenchReport alone, so what a rendered
// folder holds is only what this code understood and checked. A recorded file may come from anywhere: it is
// read with bounded size, nesting and counts, and every value must be of its field's type and in its range,
// else qt::Error (exit 2) names the file, the field and the value.
//
// {
//   "schema": "qtune-bench-report/1", "generated": "<UTC>", "command": "<argv>",
//   "device": {"kind": "cuda|emu|cpu", "name": "...", "fingerprint": "...",
//              "bandwidth_gbps": <measured>, "bandwidth_method": "..."},
//   "model": {"path": "...", "arch": "qwen3|qwen3-moe", "layers": n, "weight_type": "awq_int4"},
//   "tuned_cache": "<path>" | null,
//   "kernels": [{"type": "AWQ_INT4", "what": "q_proj, o_proj", "N": n, "K": k, "G": g, "M": m,
//                "variants": [{"name": "tuned|default|<family> default|file layout default|dequant+cublas|
//                                       fp16 cublas", "seconds": s,
//                              "bytes": moved, "detail": "family point", "unavailable": "why"}]}],
//   "end_to_end": [{"name": "FP16|AWQ default|AWQ tuned|Q8_0", "model": "...",
//                   "prefill_tok_s": {"128": tok/s, "512": tok/s}, "decode_tok_s": tok/s, "decode_steps": 128,
//                   "decode_bytes_per_token": b, "memory_mb": mb, "unavailable": "why"}],
//   "moe_grouped": {"method": "what was routed and timed, and why",
//                   "rows": [{"op": "moe_gate_up|moe_down", "type": "Q8_0", "what": "expert.w2", "T": tokens,
//                             "E": experts, "TOPK": k, "N": n, "K": k, "G": g,
//                             "variants": [{"name": "tuned|default|cublas one by one|cublas GEMMs only", ...}],
//                             "tune_best": {"name": "best of the tune", "seconds": s, "detail": "...",
//                                           "unavailable": "no tune: why"}}]},
//   "attention_decode": {"method": "what the rows time",
//                        "rows": [{"context": tokens, "H": heads, "KVH": kv heads, "D": head dim,
//                                  "variants": [{"name": "tuned|default|best splits", ...}]}]},
//   "launch_cost": {"method": "what the rows time",
//                   "rows": [{"blocks": grid, "threads": per block, "launches": chain length,
//                             "variants": [{"name": "stream|graph|stream + PDL|graph + PDL",
//                                           "seconds": per launch, ...}]}]},
//   "notes": ["..."]
// }
// A linear row's "<family> default" variants (one per other family serving the op at that M on the device, at
// its default point: family_default_name) are absent in reports older than them, which still read; so are its
// "<family> default <param>=<value>" variants (the family's other default points one parameter away).
// "moe_grouped" is optional (absent for dense models and in reports older than it), so older files still read;
// so are "attention_decode" and "launch_cost".
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qt::report {

inline constexpr const char* kReportSchema = "qtune-bench-report/1";

struct Variant {
  std::string name, detail;
  std::string unavailable;  // why it was not measured; "" when it was
  double seconds = 0;
  std::optional<double> bytes;  // bytes the variant must move, when known
};

struct KernelRow {
  std::string type;  // a weight type's name (AWQ_INT4, F16, ...): plot file names are made from it
  std::string what;
  int64_t n = 0, k = 0, g = 0, m = 0;
  std::vector<Variant> variants;
};

// One grouped expert GEMM (kernels_src/moe) at T tokens of E experts, k per token; N x K is one expert's matrix.
struct MoeRow {
  std::string op;  // moe_gate_up (gate and up, SwiGLU fused) or moe_down
  std::string type, what;
  int64_t t = 0, e = 0, topk = 0, n = 0, k = 0, g = 0;
  std::vector<Variant> variants;
  std::optional<Variant> tune_best;  // the fastest verified time of the tune at this shape, or why there is none
};

struct MoeGrouped {
  std::string method;
  std::vector<MoeRow> rows;
};

// Flash-decoding of one query token at the last row of a cache of `context` rows (kernels_src/attention).
struct AttentionRow {
  int64_t context = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::vector<Variant> variants;
};

struct AttentionDecode {
  std::string method;
  std::vector<AttentionRow> rows;
};

// A chain of back-to-back launches of one small kernel (qbench's runtime/cli/report_launch.h): seconds per launch.
struct LaunchRow {
  int64_t blocks = 0, threads = 0, launches = 0;
  std::vector<Variant> variants;
};

struct LaunchCost {
  std::string method;
  std::vector<LaunchRow> rows;
};

// The end-to-end variant whose prefill runs on an fp16 copy of the quantized weights (qrun --prefill-f16), named
// "<type> <default or tuned>" + this: it is no prefill from the quantized weights, so issue 27's prefill goal leaves
// it out, while its decode (the quantized weights) counts.
inline constexpr const char* kPrefillCopySuffix = " + fp16 prefill copy";

struct EndToEnd {
  std::string name, model;
  std::string unavailable;  // why it was not measured; "" when it was
  std::map<int64_t, double> prefill_tok_s;  // prompt length -> tok/s
  int64_t decode_steps = 0;
  std::optional<double> decode_tok_s, decode_bytes_per_token, memory_mb;
};

struct BenchReport {
  std::optional<std::string> generated, command;
  std::string device_kind, device_name;  // kind: cuda, emu or cpu
  std::optional<std::string> fingerprint, bandwidth_method;
  std::optional<double> bandwidth_gbps;
  std::string model_path;
  std::optional<std::string> model_arch, model_weight_type;
  std::optional<int64_t> model_layers;
  std::optional<std::string> tuned_cache;
  std::vector<KernelRow> kernels;
  std::vector<EndToEnd> end_to_end;
  std::optional<MoeGrouped> moe_grouped;
  std::optional<AttentionDecode> attention_decode;
  std::optional<LaunchCost> launch_cost;
  std::vector<std::string> notes;
};

// The name of a linear row's variant that times kernel family `family` at its default point: "<family> default".
std::string family_default_name(const std::string& family);
// The family such a variant, or its neighbour's (neighbour_name), names; "" for any other variant ("default",
// "file layout default", "tuned").
std::string family_of_default(const std::string& variant_name);
// The variant that times another of the family's default points, one differing from the point of variant `base`
// in parameter `param` alone: "<base> <param>=<value>" ("awq_frag_wgmma_gemm default kif=2", "frag default
// kif=2": an A/B the family's defaults ask every report for, Param::report_ab).
std::string neighbour_name(const std::string& base, const std::string& param, const std::string& value);
// "<param>=<value>" where `name` is a neighbour of variant `base`; "" otherwise.
std::string neighbour_of(const std::string& name, const std::string& base);
// The variant that times `variant`'s kernel as a decode step runs it, back to back with its caches cold:
// "<variant> in a chain".
std::string chained_name(const std::string& variant);

// `source` names the file (or "report JSON") in error messages.
BenchReport report_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json report_to_json(const BenchReport& r);
// JSON text to a report: its size and nesting are bounded before anything is built from it.
BenchReport parse_report(std::string_view text, const std::string& source);
BenchReport read_report_file(const std::string& path);

}  // namespace qt::report
