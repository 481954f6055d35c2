#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/paths.h"
#include "device/winners/dispatch.h"
#include "kernels_src/registry/stored_point.h"
#include "tuner/cli/commands.h"
#include "tuner/family/family.h"
#include "tuner/store/store.h"

namespace qt::tune {

namespace {

std::vector<int64_t> parse_shape(const std::string& s) {
  std::string t = s;
  for (char& c : t)
    if (c == 'x') c = ',';
  auto v = parse_int_list(t, "--shape");
  if (v.empty()) throw Error("--shape must list dimensions, e.g. 1024,1024,64");
  return v;
}

DeviceFingerprint device_from(const CliArgs& cli, const Store& st) {
  std::string name = cli.get("--device-name");
  for (const winners::StoredDevice& d : st.devices())
    if (d.fingerprint.name == name) return d.fingerprint;
  throw Error("no results for a device named '" + name + "' in " + st.path());
}

// A dispatch ranking that names a family this build has neither as a registry family nor as a cuBLASLt
// baseline: the runtime skips it, so the check says so.
std::vector<std::string> unknown_families(const winners::DispatchRow& d) {
  std::vector<std::string> out;
  for (const winners::Ranked& r : d.ranking) {
    // qbench --choose-decode's ranking of the decode step's variants: no kernel families.
    if (d.op == winners::kDecodeStepOp) {
      if (!winners::is_decode_variant_name(r.family)) out.push_back(r.family);
      continue;
    }
    try {
      find_family(r.family);
    } catch (const Error&) {
      out.push_back(r.family);
    }
  }
  return out;
}

}  // namespace

int store_command(const std::vector<std::string>& args) {
  if (args.empty()) throw Error("qtune store needs a subcommand: export, import, import-kt, lookup, regret, check");
  std::string sub = args[0];
  CliArgs cli("qtune store " + sub, "Results store (SQLite, WAL) operations.");
  cli.option("--cache", "FILE", "the store", "qtune-cache.sqlite");
  if (sub == "export") {
    cli.option("--out", "FILE", "JSON output (- = stdout)", "-").option("--family", "F", "only this kernel family", "");
  } else if (sub == "import" || sub == "import-kt") {
    cli.positionals("FILE", "JSON export (import) or Kernel Tuner cache .json/.json.gz (import-kt)");
    cli.flag("--force-write", "write even into a store SQLite reports malformed");
  } else if (sub == "lookup" || sub == "regret") {
    cli.option("--device-name", "NAME", "device name as stored").option("--family", "F", "kernel family");
    cli.option("--dtypes", "D", "dtypes as stored", "").option("--source-hash", "H", "restrict to this source hash", "");
    if (sub == "lookup") cli.option("--shape", "DIMS", "e.g. 4096,4096 or 4096x4096");
  } else if (sub != "check") {
    throw Error("unknown store subcommand '" + sub + "'");
  }
  if (!cli.parse(std::vector<std::string>(args.begin() + 1, args.end()))) return 0;
  // The commands that only read: a mistyped path is an error, never a new empty store (import creates one).
  if (sub != "import" && sub != "import-kt") {
    const std::string& path = cli.get("--cache");
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such store");
    if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": not a regular file, so no store");
    if (std::filesystem::file_size(path, ec) == 0) throw Error(path + ": an empty file, not a qtune store");
  }
  StoreOptions options;
  options.warn_if_damaged = sub != "check";  // check reports it itself
  options.force_write = (sub == "import" || sub == "import-kt") && cli.get_flag("--force-write");
  options.read_only = sub != "import" && sub != "import-kt";
  Store st(cli.get("--cache"), options);
  auto report_bad = [&](const std::vector<BadRow>& bad) {
    for (const BadRow& b : bad) std::fprintf(stderr, "bad row: %s: %s\n", st.path().c_str(), b.text().c_str());
  };
  if (sub == "check") {
    std::string ic = st.integrity_check();
    std::vector<BadRow> bad = st.bad_rows();
    const std::vector<winners::DispatchRow> dispatch = st.dispatch_rows();
    // Every finding first, so the count line counts them all.
    std::vector<std::string> findings;
    for (const BadRow& b : bad) findings.push_back("bad row: " + b.text());
    auto shortened = [](const std::string& t) { return t.size() > 80 ? t.substr(0, 77) + "..." : t; };
    for (const winners::DispatchRow& d : dispatch)
      for (const std::string& f : unknown_families(d))
        findings.push_back("bad row: dispatch " + shortened(d.op) + " " + shortened(nlohmann::json(d.shape).dump()) +
                           " M=" + std::to_string(d.bucket) + " ranks '" + shortened(f) +
                           "', a family this build does not have; qrun skips it");
    // Ok rows of this build's sources whose point is not one of the family's: qrun would skip them.
    for (const char* device : {"cpu", "emu", "cuda"})
      for (const std::string& name : family_names(device)) {
        const auto tunable = find_family(name);
        const kernels::KernelFamily& f = tunable->family();
        for (const winners::ResultRow& r : st.rows(name)) {
          if (r.status != Status::Ok || r.source_hash != tunable->source_hash() || kernels::point_from_json(f, r.point))
            continue;
          findings.push_back("bad row: result " + r.family + " " + nlohmann::json(r.shape).dump() + " on " +
                             r.device.name + ": point " + shortened(r.point.dump()) + " is not a point of this build's " +
                             f.name + "; qrun skips it");
        }
      }
    std::printf("%s: %lld results, %zu dispatch entries, %zu devices, integrity %s, %zu bad rows\n", st.path().c_str(),
                (long long)st.count(), dispatch.size(), st.devices().size(), ic.c_str(), findings.size());
    for (const std::string& line : findings) std::printf("%s\n", line.c_str());
    // Rows of a registry family measured on other sources than this build's: lookups ignore them.
    for (const char* device : {"cpu", "emu", "cuda"})
      for (const std::string& name : family_names(device)) {
        const std::string hash = find_family(name)->source_hash();
        for (const auto& stale : st.stale(name, hash))
          std::printf("stale: %s: %lld results for %s measured on sources %s, not this build's %s; qrun ignores them\n",
                      name.c_str(), (long long)stale.rows, stale.device_name.c_str(),
                      stale.source_hash.substr(0, 12).c_str(), hash.substr(0, 12).c_str());
      }
    return ic == "ok" && findings.empty() ? 0 : 1;
  }
  if (sub == "export") {
    if (const std::string why = overwrites_input(cli.get("--out"), {cli.get("--cache")}); !why.empty())
      throw Error("--out " + why);
    std::vector<BadRow> bad;
    std::string text = st.export_json(cli.get("--family"), &bad).dump(1);
    if (cli.get("--out") == "-") {
      std::printf("%s\n", text.c_str());
    } else {
      std::ofstream f(cli.get("--out"));
      if (!(f << text << '\n')) fail_file(cli.get("--out"), "cannot write");
    }
    // The good rows are exported either way; the exit code says some were left out.
    report_bad(bad);
    return bad.empty() ? 0 : 1;
  }
  if (sub == "import" || sub == "import-kt") {
    if (cli.positional().empty()) throw Error("qtune store " + sub + " needs a FILE");
    for (const std::string& f : cli.positional()) {
      size_t n;
      if (sub == "import-kt") {
        n = st.import_kt_cache(f);
      } else {
        std::ifstream in(f);
        if (!in) fail_file(f, "cannot open");
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded()) fail_file(f, "not valid JSON");
        n = st.import_json(j);
      }
      std::printf("%s: %zu new results\n", f.c_str(), n);  // dispatch entries replace those of their key
    }
    return 0;
  }
  DeviceFingerprint dev = device_from(cli, st);
  if (sub == "lookup") {
    auto w = st.lookup(dev, cli.get("--family"), cli.get("--dtypes"), parse_shape(cli.get("--shape")),
                       cli.get("--source-hash"));
    if (!w) {
      std::printf("{\"found\": false}\n");
      return 1;
    }
    nlohmann::json j = {{"found", true},        {"point", w->point},       {"median_s", w->median_s},
                        {"shape", w->shape},    {"exact", w->exact},       {"distance_log2", w->distance},
                        {"fallback_regret", w->fallback_regret ? nlohmann::json(*w->fallback_regret) : nlohmann::json()}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const ShapeRegret& r : st.regrets(dev, cli.get("--family"), cli.get("--dtypes"), cli.get("--source-hash")))
    out.push_back({{"shape", r.shape}, {"neighbour", r.neighbour},
                   {"regret", r.regret ? nlohmann::json(*r.regret) : nlohmann::json()}});
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

}  // namespace qt::tune
