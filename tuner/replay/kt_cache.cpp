#include "tuner/replay/kt_cache.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "common/error.h"
#include "common/sha256.h"

namespace qt::tune {

std::string read_maybe_gzip(const std::string& path, size_t max_bytes) {
  // gzread passes plain files through unchanged, so one reader serves .json and .json.gz.
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail_file(path, "cannot open");
  std::string out;
  char buf[1 << 16];
  while (true) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      fail_file(path, "cannot read (" + msg + ")");
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
    if (out.size() > max_bytes) {
      gzclose(f);
      fail_file(path, "larger than " + std::to_string(max_bytes) +
                          " bytes uncompressed (a real cache is a few MiB; a file that expands further is refused)");
    }
  }
  gzclose(f);
  return out;
}

Status kt_failure_status(const std::string& failure) {
  if (failure == "CompilationFailedConfig") return Status::CompileFailed;
  // Kernel Tuner files launch refusals ("too many resources requested") under RuntimeFailedConfig.
  if (failure == "RuntimeFailedConfig") return Status::ResourceFailed;
  if (failure == "InvalidConfig") return Status::Invalid;
  return Status::RuntimeError;
}

namespace {

// Python's json module writes a non-finite float as a bare NaN, Infinity or -Infinity, which is not JSON.
// Outside strings they become the strings "NaN", "Infinity" and "-Infinity", so a time that is one of them
// reads as a failed measurement instead of rejecting the whole cache.
std::string quote_nonfinite(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      out.append(text, i, j - i);
      i = j;
      continue;
    }
    bool replaced = false;
    for (const char* word : {"-Infinity", "Infinity", "NaN"}) {
      size_t n = std::strlen(word);
      if (text.compare(i, n, word) == 0) {
        out += '"';
        out += word;
        out += '"';
        i += n;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

bool is_nonfinite_word(const nlohmann::json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  return s == "NaN" || s == "Infinity" || s == "-Infinity";
}

nlohmann::json parse_repairing(const std::string& raw, const std::string& source) {
  const std::string text = quote_nonfinite(raw);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  // An interrupted Kernel Tuner run leaves "...}," or "...}" without the closing braces.
  std::string t = text;
  while (!t.empty() && (std::isspace(static_cast<unsigned char>(t.back())) || t.back() == ',')) t.pop_back();
  for (const char* tail : {"}}", "}", "}}}"}) {
    j = nlohmann::json::parse(t + tail, nullptr, false);
    if (!j.is_discarded()) return j;
  }
  fail_file(source, "not valid JSON (nor a Kernel Tuner cache cut short)");
}

double ms_field(const nlohmann::json& e, const char* name) {
  auto it = e.find(name);
  if (it == e.end() || !it->is_number()) return 0;  // absent, or NaN/Infinity (quoted): not known
  double v = it->get<double>();
  return std::isfinite(v) && v > 0 ? v : 0;
}

// problem_size as a shape: an integer or an array of integers, each a size in 0..2^53 (integral doubles
// such as 4096.0 included). Anything else is an error naming the value, never a wrapped conversion.
std::vector<int64_t> problem_shape(const nlohmann::json& ps, const std::string& source) {
  constexpr double kMax = 9007199254740992.0;  // 2^53: every integer below is exact in a double
  std::vector<int64_t> out;
  auto one = [&](const nlohmann::json& x) {
    if (x.is_number_unsigned() && x.get<uint64_t>() <= uint64_t(kMax)) {
      out.push_back(int64_t(x.get<uint64_t>()));
    } else if (x.is_number_integer() && !x.is_number_unsigned() && x.get<int64_t>() >= 0) {
      out.push_back(x.get<int64_t>());
    } else if (x.is_number_float() && x.get<double>() >= 0 && x.get<double>() <= kMax &&
               std::floor(x.get<double>()) == x.get<double>()) {
      out.push_back(int64_t(x.get<double>()));
    } else {
      fail_file(source, "problem_size holds " + x.dump() + ", not a size in 0..2^53");
    }
  };
  if (ps.is_null()) return out;
  if (ps.is_array()) {
    for (const auto& x : ps) one(x);
  } else {
    one(ps);
  }
  return out;
}

}  // namespace

RecordedSpace parse_kt_cache(const std::string& text, const std::string& source) {
  nlohmann::json j = parse_repairing(text, source);
  if (!j.is_object()) fail_file(source, "a Kernel Tuner cache must be a JSON object");
  for (const char* f : {"tune_params_keys", "tune_params", "cache"})
    if (!j.contains(f)) fail_file(source, std::string("missing field '") + f + "'");
  const auto& keys = j["tune_params_keys"];
  const auto& tp = j["tune_params"];
  if (!keys.is_array() || keys.empty()) fail_file(source, "'tune_params_keys' must be a non-empty array");
  if (!tp.is_object()) fail_file(source, "'tune_params' must be an object");
  if (!j["cache"].is_object()) fail_file(source, "'cache' must be an object");

  std::vector<Param> params;
  std::vector<std::map<std::string, uint16_t>> lookup;
  for (const auto& k : keys) {
    if (!k.is_string()) fail_file(source, "'tune_params_keys' must hold strings");
    std::string name = k.get<std::string>();
    auto vals = tp.find(name);
    if (vals == tp.end() || !vals->is_array() || vals->empty())
      fail_file(source, "tune_params has no value list for '" + name + "'");
    // Points hold a 16-bit index per parameter.
    if (vals->size() > 65535) fail_file(source, "tune_params '" + name + "' has more than 65535 values");
    Param p;
    p.name = name;
    std::map<std::string, uint16_t> m;
    for (const auto& v : *vals) {
      std::string t = v.dump();
      if (m.count(t)) continue;
      m[t] = uint16_t(p.text.size());
      p.text.push_back(t);
      p.numeric.push_back(v.is_number() ? v.get<double>() : v.is_boolean() ? double(v.get<bool>()) : double(p.text.size() - 1));
    }
    params.push_back(std::move(p));
    lookup.push_back(std::move(m));
  }

  RecordedSpace rs;
  rs.device_name = j.value("device_name", "");
  rs.kernel_name = j.value("kernel_name", "");
  rs.problem_size = j.value("problem_size", nlohmann::json());
  rs.space = Space(params);
  bool have_opt = false;
  for (const auto& [key, e] : j["cache"].items()) {
    if (!e.is_object()) fail_file(source, "cache entry '" + key + "' is not an object");
    Indices idx(params.size());
    for (size_t d = 0; d < params.size(); ++d) {
      auto v = e.find(params[d].name);
      if (v == e.end()) fail_file(source, "cache entry '" + key + "' lacks parameter '" + params[d].name + "'");
      auto it = lookup[d].find(v->dump());
      if (it == lookup[d].end())
        fail_file(source, "cache entry '" + key + "' has " + params[d].name + "=" + v->dump() + ", not in tune_params");
      idx[d] = it->second;
    }
    PointId id = rs.space.add(idx);
    if (id < rs.points.size()) continue;  // duplicate key spelling of a known point
    RecordedPoint rp;
    auto t = e.find("time");
    if (t == e.end()) fail_file(source, "cache entry '" + key + "' has no 'time'");
    if (is_nonfinite_word(*t)) {
      rp.failure = "time is " + t->get<std::string>();  // a run whose timing failed
      rp.status = Status::RuntimeError;
      ++rs.failures;
    } else if (t->is_string()) {
      rp.failure = t->get<std::string>();
      rp.status = kt_failure_status(rp.failure);
      ++rs.failures;
    } else if (t->is_number() && std::isfinite(t->get<double>()) && t->get<double>() > 0) {
      rp.time_ms = t->get<double>();
    } else {
      fail_file(source, "cache entry '" + key + "' has an invalid 'time' (" + t->dump() + ")");
    }
    if (auto ts = e.find("times"); ts != e.end() && !ts->is_null()) {
      if (!ts->is_array()) fail_file(source, "cache entry '" + key + "': 'times' must be an array");
      for (const auto& x : *ts) {
        if (is_nonfinite_word(x)) {
          if (rp.status == Status::Ok) {
            rp.status = Status::RuntimeError;
            rp.failure = "a repetition's time is " + x.get<std::string>();
            ++rs.failures;
          }
          continue;
        }
        if (!x.is_number() || !(x.get<double>() > 0))
          fail_file(source, "cache entry '" + key + "': 'times' holds " + x.dump() + ", not a positive time");
        rp.times_ms.push_back(x.get<double>());
      }
      if (rp.status != Status::Ok) rp.times_ms.clear();
    }
    rp.compile_ms = ms_field(e, "compile_time");
    rp.verification_ms = ms_field(e, "verification_time");
    rp.benchmark_ms = ms_field(e, "benchmark_time");
    rp.framework_ms = ms_field(e, "framework_time");
    if (rp.status == Status::Ok && (!have_opt || rp.time_ms < rs.optimum_ms)) {
      have_opt = true;
      rs.optimum = id;
      rs.optimum_ms = rp.time_ms;
    }
    rs.points.push_back(std::move(rp));
  }
  if (!have_opt) fail_file(source, "no cache entry has a measured time");
  rs.problem_shape = problem_shape(rs.problem_size, source);
  rs.content_sha256 = compile::sha256_hex(text);
  return rs;
}

RecordedSpace load_kt_cache(const std::string& path) { return parse_kt_cache(read_maybe_gzip(path), path); }

}  // namespace qt::tune
