#include "device/winners/store_schema.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <type_traits>

#include "common/error.h"
#include "device/winners/sqlite_stmt.h"

namespace qt::winners {

namespace {

// The tables of every version; ALTERs below bring an older store up to kStoreVersion.
constexpr const char* kTables = R"SQL(
CREATE TABLE IF NOT EXISTS kernel(
  id INTEGER PRIMARY KEY, family TEXT NOT NULL, source_hash TEXT NOT NULL, UNIQUE(family, source_hash));
CREATE TABLE IF NOT EXISTS result(
  id INTEGER PRIMARY KEY, device_id INTEGER NOT NULL REFERENCES device(id),
  kernel_id INTEGER NOT NULL REFERENCES kernel(id), shape TEXT NOT NULL, dtypes TEXT NOT NULL,
  point TEXT NOT NULL, status TEXT NOT NULL, median_s REAL, mad_s REAL, p20_s REAL, p80_s REAL,
  ci_low_s REAL, ci_high_s REAL, n_samples INTEGER, samples TEXT, detail TEXT, run_id TEXT,
  created_at TEXT NOT NULL,
  UNIQUE(device_id, kernel_id, shape, dtypes, point, run_id, created_at));
CREATE INDEX IF NOT EXISTS result_key ON result(device_id, kernel_id, dtypes, shape, status);
CREATE TABLE IF NOT EXISTS dispatch(device TEXT NOT NULL, op TEXT NOT NULL, weight_type TEXT NOT NULL,
  shape TEXT NOT NULL, bucket INTEGER NOT NULL, ranking TEXT NOT NULL, run_id TEXT,
  PRIMARY KEY(device, op, weight_type, shape, bucket));
)SQL";

// The device table's columns after id and fingerprint: one per fingerprint field, in field order.
struct DeviceColumn {
  std::string name, sql_type;
};
std::vector<DeviceColumn> device_columns() {
  std::vector<DeviceColumn> out;
  dev::for_each_fingerprint_field([&](const char* name, auto member, dev::FingerprintPart, bool) {
    using T = std::remove_cvref_t<decltype(DeviceFingerprint{}.*member)>;
    out.push_back({name, std::is_same_v<T, std::string> ? "TEXT" : "INTEGER"});
  });
  return out;
}

std::string device_table_sql() {
  std::string sql = "CREATE TABLE IF NOT EXISTS device(id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE";
  for (const DeviceColumn& c : device_columns()) sql += ", " + c.name + " " + c.sql_type;
  return sql + ")";
}

std::set<std::string> table_names(sqlite3* db) {
  std::set<std::string> out;
  Stmt q(db, "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'");
  while (q.step()) out.insert(q.text(0));
  return out;
}

std::set<std::string> column_names(sqlite3* db, const std::string& table) {
  std::set<std::string> out;
  Stmt q(db, "PRAGMA table_info(" + table + ")");
  while (q.step()) out.insert(q.text(1));
  return out;
}

int64_t user_version(sqlite3* db) {
  Stmt q(db, "PRAGMA user_version");
  return q.step() ? q.i64(0) : 0;
}

std::string shortened(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// ---- field decoders shared by the SQLite rows and the export's JSON ----

std::vector<int64_t> decode_shape(const nlohmann::json& j, const char* what) {
  if (!j.is_array()) throw Error(std::string(what) + " is not an array");
  std::vector<int64_t> out;
  for (const auto& x : j) {
    // A dimension may be 0 where a family uses it as a count or a flag (rmsnorm's residual R).
    if (!x.is_number_integer() || x.get<int64_t>() < 0)
      throw Error(std::string(what) + " holds " + shortened(x.dump()) + ", not a size");
    out.push_back(x.get<int64_t>());
  }
  return out;
}

nlohmann::json decode_point(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("point is not a JSON object");
  for (const auto& [name, v] : j.items())
    if (!v.is_number_integer() && !v.is_string())
      throw Error("point parameter '" + shortened(name) + "' is " + shortened(v.dump()) + ", not an integer or a label");
  return j;
}

double decode_time(const nlohmann::json& j, const char* what) {
  if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() < 0)
    throw Error(std::string(what) + " is " + shortened(j.dump()) + ", not a time in seconds");
  return j.get<double>();
}

std::vector<Ranked> decode_ranking(const nlohmann::json& j) {
  if (!j.is_array()) throw Error("ranking is not a JSON array");
  if (j.empty()) throw Error("ranking is empty");
  std::vector<Ranked> out;
  for (const auto& r : j) {
    if (!r.is_object() || !r.contains("family") || !r["family"].is_string())
      throw Error("ranking entry " + shortened(r.dump()) + " has no family name");
    const std::string family = r["family"].get<std::string>();
    const size_t dot = family.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == family.size())
      throw Error("ranking names '" + shortened(family) + "', not a <device>.<family> store name");
    if (!r.contains("median_s")) throw Error("ranking entry for " + shortened(family) + " has no median_s");
    out.push_back({family, decode_time(r["median_s"], "median_s")});
  }
  return out;
}

nlohmann::json ranking_json(const std::vector<Ranked>& ranking) {
  nlohmann::json out = nlohmann::json::array();
  for (const Ranked& r : ranking) out.push_back({{"family", r.family}, {"median_s", r.median_s}});
  return out;
}

// A JSON column's text parsed, or a qt::Error naming the column.
nlohmann::json parse_column(const std::string& text, const char* column) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error(std::string(column) + " is not valid JSON");
  return j;
}

DeviceFingerprint decode_device(const std::string& text) {
  return DeviceFingerprint::from_json(parse_column(text, "fingerprint"));
}

}  // namespace

void exec_sql(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw Error("tuning store: " + msg, kExitFailure);
  }
}

std::string quick_check(sqlite3* db) {
  std::vector<std::string> findings;
  try {
    Stmt q(db, "PRAGMA quick_check");
    while (q.step()) findings.push_back(q.text(0));
  } catch (const Error& e) {
    return e.what();  // the check itself failed on a broken file: that is its finding
  }
  if (findings.empty()) return "no answer from PRAGMA quick_check";
  if (findings.size() == 1) return shortened(findings[0]) == findings[0] ? findings[0] : shortened(findings[0]);
  return shortened(findings[0]) + " (and " + std::to_string(findings.size() - 1) + " more findings)";
}

void prepare_schema(sqlite3* db, const std::string& path, OpenMode mode) {
  std::set<std::string> tables;
  try {
    tables = table_names(db);
  } catch (const Error& e) {
    throw Error(path + ": not a readable SQLite tuning store (" + e.what() + ")", kExitBadInput);
  }
  const bool store = tables.count("result") && tables.count("device") && tables.count("kernel");
  if (!store && !tables.empty()) {
    std::string names;
    for (const std::string& t : tables) names += (names.empty() ? "" : ", ") + t;
    throw Error(path + ": not a qtune tuning store (it holds the tables " + shortened(names) +
                    "); give a new file or a store qtune wrote",
                kExitBadInput);
  }
  const int64_t version = store ? std::max<int64_t>(user_version(db), 1) : 0;
  if (version > kStoreVersion)
    throw Error(path + ": a tuning store of schema version " + std::to_string(version) + ", written by a later qtune; "
                    "this build reads versions 1 to " + std::to_string(kStoreVersion),
                kExitBadInput);
  if (mode == OpenMode::ReadOnly) {
    if (!store) throw Error(path + ": not a qtune tuning store (no result, kernel and device tables)", kExitBadInput);
    return;
  }
  if (store && version == kStoreVersion && tables.count("dispatch")) return;
  in_transaction(db, [&] {
    exec_sql(db, device_table_sql());
    exec_sql(db, kTables);
    // Version 1 stores lack the columns of fields added since; the fingerprint JSON has them all.
    const std::set<std::string> have = column_names(db, "device");
    for (const DeviceColumn& c : device_columns())
      if (!have.count(c.name)) {
        exec_sql(db, "ALTER TABLE device ADD COLUMN " + c.name + " " + c.sql_type);
        exec_sql(db, "UPDATE device SET " + c.name + " = json_extract(fingerprint, '$." + c.name + "')");
      }
    exec_sql(db, "PRAGMA user_version = " + std::to_string(kStoreVersion));
  });
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, (long long)ms);
  return out;
}

std::string BadRow::text() const { return table + " id " + std::to_string(id) + " (" + key + "): " + problem; }

// ---- device ----

int64_t put_device(sqlite3* db, const DeviceFingerprint& d) {
  for (const StoredDevice& s : read_devices(db))
    if (s.fingerprint == d) return s.id;
  std::string cols = "fingerprint", marks = "?";
  for (const DeviceColumn& c : device_columns()) cols += "," + c.name, marks += ",?";
  Stmt ins(db, "INSERT INTO device(" + cols + ") VALUES(" + marks + ")");
  int i = 1;
  ins.bind(i++, d.key());
  dev::for_each_fingerprint_field([&](const char*, auto member, dev::FingerprintPart, bool) {
    using T = std::remove_cvref_t<decltype(d.*member)>;
    if constexpr (std::is_same_v<T, std::string>) ins.bind(i++, d.*member);
    else ins.bind(i++, int64_t(d.*member));
  });
  ins.step();
  return sqlite3_last_insert_rowid(db);
}

std::vector<StoredDevice> read_devices(sqlite3* db, std::vector<BadRow>* bad) {
  std::vector<StoredDevice> out;
  Stmt q(db, "SELECT id, fingerprint FROM device ORDER BY id");
  while (q.step()) {
    try {
      out.push_back({q.i64(0), decode_device(q.text(1))});
    } catch (const Error& e) {
      if (bad) bad->push_back({"device", q.i64(0), "fingerprint " + shortened(q.text(1)), e.what()});
    }
  }
  return out;
}

// ---- result ----

nlohmann::json ResultRow::to_json() const {
  return {{"device", device.to_json()}, {"family", family},     {"source_hash", source_hash},
          {"shape", shape},             {"dtypes", dtypes},     {"point", point},
          {"status", status_name(status)}, {"stats", stats_to_json(stats)}, {"detail", detail},
          {"run_id", run_id},           {"created_at", created_at}};
}

ResultRow ResultRow::from_json(const nlohmann::json& e) {
  if (!e.is_object()) throw Error("a result is not a JSON object");
  auto text = [&](const char* name, bool required) -> std::string {
    if (!e.contains(name)) {
      if (required) throw Error(std::string("missing ") + name);
      return "";
    }
    if (!e[name].is_string()) throw Error(std::string(name) + " is not a string");
    return e[name].get<std::string>();
  };
  ResultRow r;
  if (!e.contains("device")) throw Error("missing device");
  r.device = DeviceFingerprint::from_json(e["device"]);
  r.family = text("family", true);
  r.source_hash = text("source_hash", false);
  if (!e.contains("shape")) throw Error("missing shape");
  r.shape = decode_shape(e["shape"], "shape");
  r.dtypes = text("dtypes", false);
  if (!e.contains("point")) throw Error("missing point");
  r.point = decode_point(e["point"]);
  r.status = parse_status(text("status", true));
  const nlohmann::json stats = e.value("stats", nlohmann::json::object());
  if (!stats.is_object()) throw Error("stats is not a JSON object");
  if (stats.contains("samples")) {
    if (!stats["samples"].is_array()) throw Error("stats.samples is not an array");
    for (const auto& s : stats["samples"]) decode_time(s, "a sample");
  }
  r.stats = stats_from_json(stats);
  r.detail = text("detail", false);
  r.run_id = text("run_id", false);
  r.created_at = text("created_at", true);
  return r;
}

size_t put_results(sqlite3* db, const std::vector<ResultRow>& rows) {
  size_t inserted = 0;
  {
    Stmt ins(db,
             "INSERT OR IGNORE INTO result(device_id,kernel_id,shape,dtypes,point,status,median_s,mad_s,p20_s,p80_s,"
             "ci_low_s,ci_high_s,n_samples,samples,detail,run_id,created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    Stmt kernel_ins(db, "INSERT OR IGNORE INTO kernel(family, source_hash) VALUES(?,?)");
    Stmt kernel_id(db, "SELECT id FROM kernel WHERE family=? AND source_hash=?");
    std::map<std::string, int64_t> device_ids;  // by key, for the rows of this call
    const std::string now = utc_timestamp();
    for (const ResultRow& r : rows) {
      auto dev = device_ids.find(r.device.key());
      if (dev == device_ids.end()) dev = device_ids.emplace(r.device.key(), put_device(db, r.device)).first;
      kernel_ins.reset();
      kernel_ins.bind(1, r.family).bind(2, r.source_hash).step();
      kernel_id.reset();
      kernel_id.bind(1, r.family).bind(2, r.source_hash);
      if (!kernel_id.step()) throw Error("tuning store: the kernel row vanished", kExitFailure);
      ins.reset();
      ins.bind(1, dev->second).bind(2, kernel_id.i64(0));
      // nlohmann sorts object keys, so equal points have equal text.
      ins.bind(3, nlohmann::json(r.shape).dump()).bind(4, r.dtypes).bind(5, r.point.dump());
      ins.bind(6, std::string(status_name(r.status))).bind(7, r.stats.median).bind(8, r.stats.mad);
      ins.bind(9, r.stats.p20).bind(10, r.stats.p80).bind(11, r.stats.ci_low).bind(12, r.stats.ci_high);
      ins.bind(13, int64_t(r.stats.n)).bind(14, nlohmann::json(r.stats.samples).dump()).bind(15, r.detail);
      ins.bind(16, r.run_id).bind(17, r.created_at.empty() ? now : r.created_at);
      ins.step();
      inserted += size_t(sqlite3_changes(db));  // 0 when OR IGNORE skipped a duplicate
    }
  }
  return inserted;
}

std::vector<ResultRow> read_results(sqlite3* db, const ResultQuery& query, std::vector<BadRow>* bad) {
  std::vector<StoredDevice> devices = read_devices(db, bad);
  std::map<int64_t, const DeviceFingerprint*> by_id;
  for (const StoredDevice& d : devices) by_id[d.id] = &d.fingerprint;
  std::string sql =
      "SELECT r.id, r.device_id, k.family, k.source_hash, r.shape, r.dtypes, r.point, r.status, r.samples, "
      "r.median_s, r.n_samples, r.detail, r.run_id, r.created_at FROM result r JOIN kernel k ON r.kernel_id=k.id "
      "WHERE 1";
  if (!query.family.empty()) sql += " AND k.family=?1";
  if (!query.dtypes.empty()) sql += " AND r.dtypes=?2";
  if (!query.source_hash.empty()) sql += " AND k.source_hash=?3";
  if (query.ok_only) sql += " AND r.status='ok'";
  if (query.device_ids) {
    sql += " AND r.device_id IN (";
    for (size_t i = 0; i < query.device_ids->size(); ++i) sql += (i ? "," : "") + std::to_string((*query.device_ids)[i]);
    sql += ")";
  }
  sql += " ORDER BY r.id";
  Stmt q(db, sql);
  if (!query.family.empty()) q.bind(1, query.family);
  if (!query.dtypes.empty()) q.bind(2, query.dtypes);
  if (!query.source_hash.empty()) q.bind(3, query.source_hash);
  std::vector<ResultRow> out;
  int64_t last_id = 0;
  for (;;) {
    // SQLite stops a scan at a damaged page: the rows read so far stay usable and the rest is reported.
    try {
      if (!q.step()) break;
    } catch (const Error& e) {
      if (bad) bad->push_back({"result", last_id + 1, "the rows after result id " + std::to_string(last_id), e.what()});
      break;
    }
    last_id = q.i64(0);
    ResultRow r;
    r.family = q.text(2);
    r.source_hash = q.text(3);
    r.dtypes = q.text(5);
    try {
      const auto dev = by_id.find(q.i64(1));
      if (dev == by_id.end()) throw Error("its device row " + std::to_string(q.i64(1)) + " is missing or unreadable");
      r.device = *dev->second;
      r.shape = decode_shape(parse_column(q.text(4), "shape"), "shape");
      r.point = decode_point(parse_column(q.text(6), "point"));
      r.status = parse_status(q.text(7));
      const nlohmann::json samples = parse_column(q.text(8), "samples");
      if (!samples.is_array()) throw Error("samples is not an array");
      std::vector<double> s;
      for (const auto& x : samples) s.push_back(decode_time(x, "a sample"));
      if (!s.empty()) {
        r.stats = summarize(s);
      } else {
        r.stats.median = decode_time(nlohmann::json(q.f64(9)), "median_s");
        r.stats.n = int(q.i64(10));
      }
      if (has_time(r.status) && r.stats.n == 0) throw Error("an " + std::string(status_name(r.status)) + " row without a time");
    } catch (const std::exception& e) {
      if (bad)
        bad->push_back({"result", last_id,
                        "family " + shortened(r.family) + ", shape " + shortened(q.text(4)) + ", dtypes " +
                            shortened(r.dtypes) + ", point " + shortened(q.text(6)),
                        e.what()});
      continue;
    }
    r.detail = q.text(11);
    r.run_id = q.text(12);
    r.created_at = q.text(13);
    out.push_back(std::move(r));
  }
  return out;
}

// ---- dispatch ----

nlohmann::json DispatchRow::to_json() const {
  return {{"device", device.to_json()}, {"op", op},         {"weight_type", weight_type}, {"shape", shape},
          {"bucket", bucket},           {"ranking", ranking_json(ranking)}, {"run_id", run_id}};
}

DispatchRow DispatchRow::from_json(const nlohmann::json& e) {
  if (!e.is_object()) throw Error("a dispatch entry is not a JSON object");
  for (const char* f : {"device", "op", "weight_type", "shape", "bucket", "ranking"})
    if (!e.contains(f)) throw Error(std::string("missing ") + f);
  DispatchRow r;
  r.device = DeviceFingerprint::from_json(e["device"]);
  if (!e["op"].is_string() || !e["weight_type"].is_string()) throw Error("op and weight_type must be strings");
  r.op = e["op"].get<std::string>();
  r.weight_type = e["weight_type"].get<std::string>();
  r.shape = decode_shape(e["shape"], "shape");
  if (!e["bucket"].is_number_integer() || e["bucket"].get<int64_t>() < 1) throw Error("bucket is not a batch size");
  r.bucket = e["bucket"].get<int64_t>();
  r.ranking = decode_ranking(e["ranking"]);
  r.run_id = e.value("run_id", "");
  return r;
}

void put_dispatch_rows(sqlite3* db, const std::vector<DispatchRow>& rows) {
  {
    Stmt del(db, "DELETE FROM dispatch WHERE device=? AND op=? AND weight_type=? AND shape=?");
    Stmt ins(db, "INSERT OR REPLACE INTO dispatch(device, op, weight_type, shape, bucket, ranking, run_id) "
                 "VALUES(?,?,?,?,?,?,?)");
    std::set<std::string> cleared;  // each key's old buckets go once, before its first new row
    for (const DispatchRow& r : rows) {
      const std::string shape = nlohmann::json(r.shape).dump();
      if (cleared.insert(r.device.key() + "|" + r.op + "|" + r.weight_type + "|" + shape).second) {
        del.reset();
        del.bind(1, r.device.key()).bind(2, r.op).bind(3, r.weight_type).bind(4, shape).step();
      }
      ins.reset();
      ins.bind(1, r.device.key()).bind(2, r.op).bind(3, r.weight_type).bind(4, shape).bind(5, r.bucket);
      ins.bind(6, ranking_json(r.ranking).dump()).bind(7, r.run_id).step();
    }
  }
}

std::vector<DispatchRow> read_dispatch_rows(sqlite3* db, const DispatchQuery& query, std::vector<BadRow>* bad) {
  std::vector<DispatchRow> out;
  if (!table_names(db).count("dispatch")) return out;  // a version 1 store opened read-only may predate the table
  std::string sql = "SELECT rowid, device, op, weight_type, shape, bucket, ranking, run_id FROM dispatch WHERE 1";
  if (!query.op.empty()) sql += " AND op=?1";
  if (!query.weight_type.empty()) sql += " AND weight_type=?2";
  if (query.shape) sql += " AND shape=?3";
  sql += " ORDER BY bucket, rowid";
  Stmt q(db, sql);
  if (!query.op.empty()) q.bind(1, query.op);
  if (!query.weight_type.empty()) q.bind(2, query.weight_type);
  if (query.shape) q.bind(3, nlohmann::json(*query.shape).dump());
  while (q.step()) {
    DispatchRow r;
    r.op = q.text(2);
    r.weight_type = q.text(3);
    try {
      r.device = decode_device(q.text(1));
      if (query.device && r.device != *query.device) continue;
      r.shape = decode_shape(parse_column(q.text(4), "shape"), "shape");
      if (q.i64(5) < 1) throw Error("bucket " + std::to_string(q.i64(5)) + " is not a batch size");
      r.bucket = q.i64(5);
      r.ranking = decode_ranking(parse_column(q.text(6), "ranking"));
    } catch (const std::exception& e) {
      if (bad)
        bad->push_back({"dispatch", q.i64(0),
                        shortened(r.op) + " " + shortened(r.weight_type) + " " + shortened(q.text(4)) + " M=" + q.text(5),
                        e.what()});
      continue;
    }
    r.run_id = q.text(7);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace qt::winners
