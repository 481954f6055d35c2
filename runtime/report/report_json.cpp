#include "runtime/report/report_json.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/paths.h"
#include "common/flag_ranges.h"
#include "common/value_range.h"
#include "models/core/config_limits.h"
#include "models/core/weight_traits.h"

namespace qt::report {
namespace {

using nlohmann::json;

// What a report may hold. Our own reports stay far below (a few hundred kernel rows, strings of a path's
// length); the bounds keep a hostile file from costing more than a moment and a few megabytes.
constexpr size_t kMaxReportBytes = size_t{16} << 20;
constexpr int kMaxDepth = 8;  // the schema nests 6 deep (report.moe_grouped.rows[i].variants[j].name)
constexpr size_t kMaxStringBytes = 16384;
constexpr size_t kMaxMoeRows = 4096, kMaxAttentionRows = 64, kMaxLaunchRows = 16, kMaxKernelRows = 4096, kMaxVariants = 32, kMaxEndToEnd = 64, kMaxPromptLengths = 64,
                 kMaxNotes = 256;

// Ranges of the figures, wide enough for any machine's measurement: a value outside is damage, and would
// render as a figure that means nothing.
constexpr IntRange kDimension{1, limits::kMaxVocab};  // N and K: the classifier's rows are the largest
constexpr IntRange kGroup{0, limits::kMaxVocab};      // 0: not grouped; an unquantized row may give G = K
constexpr RealRange kSeconds{1e-12, 1e6};
constexpr RealRange kBytes{1, 1e15};
constexpr RealRange kBandwidthGbps{1e-3, 1e6};
constexpr RealRange kTokensPerSecond{1e-6, 1e9};
constexpr RealRange kMegabytes{0, 1e9, true};

// Reads one report, naming `source` and the path of the field in every error.
class SchemaReader {
 public:
  explicit SchemaReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& why) const {
    throw Error(source_ + ": " + where + " " + why);
  }
  [[noreturn]] void fail_value(const std::string& where, const std::string& what, const json& v) const {
    fail(where, "must be " + what + ", got " + excerpt(v));
  }
  // A value as one short ASCII line: a hostile string cannot reach the terminal as it is.
  static std::string excerpt(const json& v) {
    std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
    return s.size() <= 60 ? s : s.substr(0, 57) + "...";
  }

  const json& object(const json& v, const std::string& where) const {
    if (!v.is_object()) fail_value(where, "an object", v);
    return v;
  }
  const json& array(const json& v, const std::string& where, size_t max) const {
    if (!v.is_array()) fail_value(where, "an array", v);
    if (v.size() > max) fail(where, "has " + std::to_string(v.size()) + " entries, more than " + std::to_string(max));
    return v;
  }
  const json* find(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& need(const json& obj, const char* key, const std::string& where) const {
    const json* v = find(obj, key);
    if (!v) fail(where, std::string("has no '") + key + "'");
    return *v;
  }

  std::string text(const json& v, const std::string& where) const {
    if (!v.is_string()) fail_value(where, "a string", v);
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > kMaxStringBytes)
      fail(where, "is " + std::to_string(s.size()) + " bytes long, more than " + std::to_string(kMaxStringBytes));
    return s;
  }
  std::optional<std::string> optional_text(const json& obj, const char* key, const std::string& where) const {
    const json* v = find(obj, key);
    if (!v || v->is_null()) return std::nullopt;
    return text(*v, where + "." + key);
  }
  // Why a variant was not measured, when it was not: then it must say why.
  std::optional<std::string> unavailable(const json& obj, const std::string& where) const {
    const std::optional<std::string> why = optional_text(obj, "unavailable", where);
    if (why && why->empty()) fail(where + ".unavailable", "must say why");
    return why;
  }

  double real(const json& v, const std::string& where, const RealRange& r) const {
    if (!v.is_number() || !contains(r, v.get<double>())) fail_value(where, "a number in " + range_text(r), v);
    return v.get<double>();
  }
  std::optional<double> optional_real(const json& obj, const char* key, const std::string& where,
                                      const RealRange& r) const {
    const json* v = find(obj, key);
    if (!v || v->is_null()) return std::nullopt;
    return real(*v, where + "." + key, r);
  }

  // An integer, written as one (4096) or as a float with no fraction (4096.0).
  int64_t integer(const json& v, const std::string& where, const IntRange& r) const {
    const std::string expected = "an integer in " + range_text(r);
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t(r.hi)) fail_value(where, expected, v);
      return int64_t(v.get<uint64_t>());
    }
    if (v.is_number_integer()) {
      if (!contains(r, v.get<int64_t>())) fail_value(where, expected, v);
      return v.get<int64_t>();
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= double(r.lo) && d <= double(r.hi)) return int64_t(d);
    }
    fail_value(where, expected, v);
  }

 private:
  std::string source_;
};

// A row's name and, when it was not measured, why; false for such a row, which has no figures to read.
template <class Row>
bool read_measured(const SchemaReader& r, const json& j, const std::string& where, Row& row) {
  r.object(j, where);
  row.name = r.text(r.need(j, "name", where), where + ".name");
  if (const auto why = r.unavailable(j, where)) row.unavailable = *why;
  return row.unavailable.empty();
}

Variant read_variant(const SchemaReader& r, const json& j, const std::string& where) {
  Variant v;
  const bool measured = read_measured(r, j, where, v);
  v.detail = r.optional_text(j, "detail", where).value_or("");
  if (!measured) return v;
  if (!r.find(j, "seconds")) r.fail(where, "has neither 'seconds' nor 'unavailable'");
  v.seconds = r.real(j.at("seconds"), where + ".seconds", kSeconds);
  v.bytes = r.optional_real(j, "bytes", where, kBytes);
  return v;
}

std::vector<Variant> read_variants(const SchemaReader& r, const json& j, const std::string& where) {
  std::vector<Variant> out;
  const json& vs = r.array(r.need(j, "variants", where), where + ".variants", kMaxVariants);
  for (size_t i = 0; i < vs.size(); ++i) out.push_back(read_variant(r, vs[i], where + ".variants[" + std::to_string(i) + "]"));
  return out;
}

// A section of rows with the text saying how they were measured: {"method": "...", "rows": [...]}.
template <class Section, class ReadRow>
Section read_section(const SchemaReader& r, const json& j, const std::string& name, size_t max_rows, ReadRow read_row) {
  r.object(j, name);
  Section out;
  out.method = r.optional_text(j, "method", name).value_or("");
  const json& rows = r.array(r.need(j, "rows", name), name + ".rows", max_rows);
  for (size_t i = 0; i < rows.size(); ++i) out.rows.push_back(read_row(r, rows[i], name + ".rows[" + std::to_string(i) + "]"));
  return out;
}

KernelRow read_kernel(const SchemaReader& r, const json& j, const std::string& where) {
  r.object(j, where);
  KernelRow k;
  k.type = r.text(r.need(j, "type", where), where + ".type");
  if (!weight_type_by_name(k.type)) r.fail_value(where + ".type", "a weight type (F16, Q8_0, AWQ_INT4, ...)", j.at("type"));
  k.what = r.optional_text(j, "what", where).value_or("");
  k.n = r.integer(r.need(j, "N", where), where + ".N", kDimension);
  k.k = r.integer(r.need(j, "K", where), where + ".K", kDimension);
  k.g = r.integer(r.need(j, "G", where), where + ".G", kGroup);
  k.m = r.integer(r.need(j, "M", where), where + ".M", flag_ranges::kBatchRows);
  k.variants = read_variants(r, j, where);
  return k;
}

MoeRow read_moe_row(const SchemaReader& r, const json& j, const std::string& where) {
  r.object(j, where);
  MoeRow m;
  m.op = r.text(r.need(j, "op", where), where + ".op");
  if (m.op != "moe_gate_up" && m.op != "moe_down") r.fail_value(where + ".op", "moe_gate_up or moe_down", j.at("op"));
  m.type = r.text(r.need(j, "type", where), where + ".type");
  if (!weight_type_by_name(m.type)) r.fail_value(where + ".type", "a weight type (Q8_0, AWQ_INT4, ...)", j.at("type"));
  m.what = r.optional_text(j, "what", where).value_or("");
  m.t = r.integer(r.need(j, "T", where), where + ".T", flag_ranges::kBatchRows);
  m.e = r.integer(r.need(j, "E", where), where + ".E", limits::kExpertsRange);
  m.topk = r.integer(r.need(j, "TOPK", where), where + ".TOPK", IntRange{1, m.e});
  m.n = r.integer(r.need(j, "N", where), where + ".N", kDimension);
  m.k = r.integer(r.need(j, "K", where), where + ".K", kDimension);
  m.g = r.integer(r.need(j, "G", where), where + ".G", kGroup);
  m.variants = read_variants(r, j, where);
  if (const json* best = r.find(j, "tune_best"); best && !best->is_null())
    m.tune_best = read_variant(r, *best, where + ".tune_best");
  return m;
}

AttentionRow read_attention_row(const SchemaReader& r, const json& j, const std::string& where) {
  r.object(j, where);
  AttentionRow a;
  a.context = r.integer(r.need(j, "context", where), where + ".context", limits::kTokenCountRange);
  a.heads = r.integer(r.need(j, "H", where), where + ".H", limits::kHeadsRange);
  a.kv_heads = r.integer(r.need(j, "KVH", where), where + ".KVH", IntRange{1, a.heads});
  a.head_dim = r.integer(r.need(j, "D", where), where + ".D", limits::kHeadDimRange);
  a.variants = read_variants(r, j, where);
  return a;
}

LaunchRow read_launch_row(const SchemaReader& r, const json& j, const std::string& where) {
  r.object(j, where);
  LaunchRow l;
  l.blocks = r.integer(r.need(j, "blocks", where), where + ".blocks", IntRange{1, int64_t{1} << 31});
  l.threads = r.integer(r.need(j, "threads", where), where + ".threads", IntRange{1, 1024});
  l.launches = r.integer(r.need(j, "launches", where), where + ".launches", IntRange{1, 1 << 20});
  l.variants = read_variants(r, j, where);
  return l;
}

// A prompt length as a key: digits only, as std::to_string writes it.
int64_t prompt_length(const SchemaReader& r, const std::string& key, const std::string& where) {
  const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos &&
                      (key == "0" || key[0] != '0');
  if (!digits) r.fail(where, "has a key " + SchemaReader::excerpt(key) + " that is not a prompt length");
  const int64_t n = std::stoll(key);
  if (!contains(limits::kTokenCountRange, n))
    r.fail(where, "has a prompt length " + key + " outside " + range_text(limits::kTokenCountRange));
  return n;
}

EndToEnd read_end_to_end(const SchemaReader& r, const json& j, const std::string& where) {
  EndToEnd e;
  const bool measured = read_measured(r, j, where, e);
  e.model = r.optional_text(j, "model", where).value_or("");
  if (!measured) return e;
  const std::string pf_where = where + ".prefill_tok_s";
  const json& pf = r.object(r.need(j, "prefill_tok_s", where), pf_where);
  if (pf.size() > kMaxPromptLengths) r.fail(pf_where, "has more than " + std::to_string(kMaxPromptLengths) + " prompt lengths");
  for (const auto& [key, v] : pf.items())
    e.prefill_tok_s[prompt_length(r, key, pf_where)] = r.real(v, pf_where + "[" + key + "]", kTokensPerSecond);
  e.decode_steps = r.integer(r.need(j, "decode_steps", where), where + ".decode_steps", limits::kTokenCountRange);
  e.decode_tok_s = r.optional_real(j, "decode_tok_s", where, kTokensPerSecond);
  e.decode_bytes_per_token = r.optional_real(j, "decode_bytes_per_token", where, kBytes);
  e.memory_mb = r.optional_real(j, "memory_mb", where, kMegabytes);
  return e;
}

// 4096 rather than 4096.0 for a whole number, as the measurement wrote it.
json number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return json(int64_t(v));
  return json(v);
}

void put(json& j, const char* key, const std::optional<std::string>& v) {
  if (v) j[key] = *v;
}
void put(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = number(*v);
}

json variant_json(const Variant& v) {
  json vj = {{"name", v.name}};
  if (!v.unavailable.empty()) {
    vj["unavailable"] = v.unavailable;
  } else {
    vj["seconds"] = v.seconds;
    put(vj, "bytes", v.bytes);
  }
  if (!v.detail.empty()) vj["detail"] = v.detail;
  return vj;
}

json variants_json(const std::vector<Variant>& variants) {
  json out = json::array();
  for (const Variant& v : variants) out.push_back(variant_json(v));
  return out;
}

json moe_json(const MoeGrouped& m) {
  json rows = json::array();
  for (const MoeRow& row : m.rows) {
    json rj = {{"op", row.op}, {"type", row.type}, {"T", row.t}, {"E", row.e}, {"TOPK", row.topk}, {"N", row.n},
               {"K", row.k}, {"G", row.g}, {"variants", variants_json(row.variants)}};
    if (!row.what.empty()) rj["what"] = row.what;
    if (row.tune_best) rj["tune_best"] = variant_json(*row.tune_best);
    rows.push_back(rj);
  }
  json j = {{"rows", rows}};
  if (!m.method.empty()) j["method"] = m.method;
  return j;
}

json launch_json(const LaunchCost& c) {
  json rows = json::array();
  for (const LaunchRow& row : c.rows)
    rows.push_back({{"blocks", row.blocks}, {"threads", row.threads}, {"launches", row.launches},
                    {"variants", variants_json(row.variants)}});
  json j = {{"rows", rows}};
  if (!c.method.empty()) j["method"] = c.method;
  return j;
}

json attention_json(const AttentionDecode& a) {
  json rows = json::array();
  for (const AttentionRow& row : a.rows) {
    rows.push_back({{"context", row.context}, {"H", row.heads}, {"KVH", row.kv_heads}, {"D", row.head_dim},
                    {"variants", variants_json(row.variants)}});
  }
  json j = {{"rows", rows}};
  if (!a.method.empty()) j["method"] = a.method;
  return j;
}

}  // namespace

std::string family_default_name(const std::string& family) { return family + " default"; }

std::string neighbour_name(const std::string& base, const std::string& param, const std::string& value) {
  return base + " " + param + "=" + value;
}

std::string neighbour_of(const std::string& name, const std::string& base) {
  if (name.size() <= base.size() + 1 || name.rfind(base + " ", 0) != 0) return "";
  const std::string ab = name.substr(base.size() + 1);
  return ab.find('=') != std::string::npos && ab.find(' ') == std::string::npos ? ab : "";
}

std::string chained_name(const std::string& variant) { return variant + " in a chain"; }

std::string family_of_default(const std::string& variant_name) {
  static const std::string kSuffix = " default";
  std::string name = variant_name;
  // A neighbour's name: the base's, then one word with its "=" (neighbour_name).
  if (const size_t space = name.rfind(' '); space != std::string::npos && name.find('=', space) != std::string::npos)
    name.resize(space);
  if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) return "";
  const std::string family = name.substr(0, name.size() - kSuffix.size());
  // Family names are one word ("awq_frag_stream_gemv", "moe_down.q8_0"): "file layout default" names none.
  return family.find(' ') == std::string::npos ? family : "";
}

BenchReport report_from_json(const json& j, const std::string& source) {
  const SchemaReader r(source);
  r.object(j, "the top level");
  BenchReport out;
  const std::string schema = r.text(r.need(j, "schema", "report"), "schema");
  if (schema != kReportSchema) r.fail("schema", SchemaReader::excerpt(schema) + " is not " + kReportSchema);
  out.generated = r.optional_text(j, "generated", "report");
  out.command = r.optional_text(j, "command", "report");

  const json& dev = r.object(r.need(j, "device", "report"), "device");
  out.device_kind = r.text(r.need(dev, "kind", "device"), "device.kind");
  if (out.device_kind != "cuda" && out.device_kind != "emu" && out.device_kind != "cpu")
    r.fail_value("device.kind", "cuda, emu or cpu", dev.at("kind"));
  out.device_name = r.text(r.need(dev, "name", "device"), "device.name");
  out.fingerprint = r.optional_text(dev, "fingerprint", "device");
  out.bandwidth_gbps = r.optional_real(dev, "bandwidth_gbps", "device", kBandwidthGbps);
  out.bandwidth_method = r.optional_text(dev, "bandwidth_method", "device");

  const json& model = r.object(r.need(j, "model", "report"), "model");
  out.model_path = r.text(r.need(model, "path", "model"), "model.path");
  out.model_arch = r.optional_text(model, "arch", "model");
  out.model_weight_type = r.optional_text(model, "weight_type", "model");
  if (const json* layers = r.find(model, "layers"); layers && !layers->is_null())
    out.model_layers = r.integer(*layers, "model.layers", limits::kLayersRange);
  out.tuned_cache = r.optional_text(j, "tuned_cache", "report");

  if (const json* ks = r.find(j, "kernels")) {
    r.array(*ks, "kernels", kMaxKernelRows);
    for (size_t i = 0; i < ks->size(); ++i)
      out.kernels.push_back(read_kernel(r, (*ks)[i], "kernels[" + std::to_string(i) + "]"));
  }
  if (const json* es = r.find(j, "end_to_end")) {
    r.array(*es, "end_to_end", kMaxEndToEnd);
    for (size_t i = 0; i < es->size(); ++i)
      out.end_to_end.push_back(read_end_to_end(r, (*es)[i], "end_to_end[" + std::to_string(i) + "]"));
  }
  if (const json* moe = r.find(j, "moe_grouped"); moe && !moe->is_null())
    out.moe_grouped = read_section<MoeGrouped>(r, *moe, "moe_grouped", kMaxMoeRows, read_moe_row);
  if (const json* att = r.find(j, "attention_decode"); att && !att->is_null())
    out.attention_decode = read_section<AttentionDecode>(r, *att, "attention_decode", kMaxAttentionRows, read_attention_row);
  if (const json* lc = r.find(j, "launch_cost"); lc && !lc->is_null())
    out.launch_cost = read_section<LaunchCost>(r, *lc, "launch_cost", kMaxLaunchRows, read_launch_row);
  if (const json* notes = r.find(j, "notes")) {
    r.array(*notes, "notes", kMaxNotes);
    for (size_t i = 0; i < notes->size(); ++i) out.notes.push_back(r.text((*notes)[i], "notes[" + std::to_string(i) + "]"));
  }
  return out;
}

json report_to_json(const BenchReport& r) {
  json j = {{"schema", kReportSchema}};
  put(j, "generated", r.generated);
  put(j, "command", r.command);
  json dev = {{"kind", r.device_kind}, {"name", r.device_name}};
  put(dev, "fingerprint", r.fingerprint);
  put(dev, "bandwidth_gbps", r.bandwidth_gbps);
  put(dev, "bandwidth_method", r.bandwidth_method);
  j["device"] = dev;
  json model = {{"path", r.model_path}};
  put(model, "arch", r.model_arch);
  put(model, "weight_type", r.model_weight_type);
  if (r.model_layers) model["layers"] = *r.model_layers;
  j["model"] = model;
  j["tuned_cache"] = r.tuned_cache ? json(*r.tuned_cache) : json();
  json kernels = json::array();
  for (const KernelRow& k : r.kernels) {
    json kj = {{"type", k.type}, {"N", k.n}, {"K", k.k}, {"G", k.g}, {"M", k.m}, {"variants", variants_json(k.variants)}};
    if (!k.what.empty()) kj["what"] = k.what;
    kernels.push_back(kj);
  }
  j["kernels"] = kernels;
  json e2e = json::array();
  for (const EndToEnd& e : r.end_to_end) {
    json ej = {{"name", e.name}};
    if (!e.model.empty()) ej["model"] = e.model;
    if (!e.unavailable.empty()) {
      ej["unavailable"] = e.unavailable;
    } else {
      json pf = json::object();
      for (const auto& [len, rate] : e.prefill_tok_s) pf[std::to_string(len)] = number(rate);
      ej["prefill_tok_s"] = pf;
      ej["decode_steps"] = e.decode_steps;
      put(ej, "decode_tok_s", e.decode_tok_s);
      put(ej, "decode_bytes_per_token", e.decode_bytes_per_token);
      put(ej, "memory_mb", e.memory_mb);
    }
    e2e.push_back(ej);
  }
  j["end_to_end"] = e2e;
  if (r.moe_grouped) j["moe_grouped"] = moe_json(*r.moe_grouped);
  if (r.attention_decode) j["attention_decode"] = attention_json(*r.attention_decode);
  if (r.launch_cost) j["launch_cost"] = launch_json(*r.launch_cost);
  j["notes"] = r.notes;
  return j;
}

BenchReport parse_report(std::string_view text, const std::string& source) {
  if (text.size() > kMaxReportBytes)
    throw Error(source + ": " + std::to_string(text.size()) + " bytes, more than a report's " +
                std::to_string(kMaxReportBytes >> 20) + " MiB");
  // The depth is checked as the parser descends, so a deeply nested file is refused before it is built.
  const json::parser_callback_t depth_guard = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth)
      throw Error(source + ": nested more than " + std::to_string(kMaxDepth) + " levels deep, which no report is");
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), depth_guard);
  } catch (const json::exception& e) {
    const std::string why = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ..."
    throw Error(source + ": not JSON (" + why.substr(why.find("] ") == std::string::npos ? 0 : why.find("] ") + 2) + ")");
  }
  return report_from_json(j, source);
}

BenchReport read_report_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error(path + ": a folder, not a report.json");
  if (const std::string why = regular_file_problem(path); !why.empty()) throw Error(path + ": " + why);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the report");
  std::string text(kMaxReportBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  if (in.bad()) throw Error(path + ": cannot read the report", kExitFailure);
  text.resize(size_t(in.gcount()));
  return parse_report(text, path);
}

}  // namespace qt::report
