#pragma once
// A benchmark report: the measurements of one qbench --report run as JSON (schema "qtune-bench-report/1",
// below), rendered to REPORT.md and SVG plots. Rendering only reads the JSON, so a recorded file renders
// the same anywhere (qbench --render FILE --report DIR).
//
// {
//   "schema": "qtune-bench-report/1", "generated": "<UTC>", "command": "<argv>",
//   "device": {"kind": "cuda|emu|cpu", "name": "...", "fingerprint": "...",
//              "bandwidth_gbps": <measured>, "bandwidth_method": "..."},
//   "model": {"path": "...", "arch": "qwen3|qwen3-moe", "layers": n, "weight_type": "awq_int4"},
//   "tuned_cache": "<path>" | null,
//   "kernels": [{"type": "awq_int4", "what": "q_proj, o_proj", "N": n, "K": k, "G": g, "M": m,
//                "variants": [{"name": "tuned|default|dequant+cublas|fp16 cublas", "seconds": s,
//                              "bytes": moved, "detail": "family point", "unavailable": "why"}]}],
//   "end_to_end": [{"name": "FP16|AWQ default|AWQ tuned|Q8_0", "model": "...",
//                   "prefill_tok_s": {"128": tok/s, "512": tok/s}, "decode_tok_s": tok/s, "decode_steps": 128,
//                   "decode_bytes_per_token": b, "memory_mb": mb, "unavailable": "why"}],
//   "notes": ["..."]
// }
// Times of "emu" reports are the emulator's and say nothing about a GPU; the report says so.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace qt::report {

inline constexpr const char* kReportSchema = "qtune-bench-report/1";

struct RenderedReport {
  std::string markdown;                      // REPORT.md
  std::map<std::string, std::string> plots;  // file name under plots/ -> SVG text
};

// Throws qt::Error naming the first missing or mistyped field.
RenderedReport render_report(const nlohmann::json& data);
// Writes DIR/REPORT.md, DIR/report.json and DIR/plots/*.svg (DIR is created).
void write_report(const nlohmann::json& data, const std::string& dir);

}  // namespace qt::report
