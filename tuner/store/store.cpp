#include "tuner/store/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <map>

#include "common/error.h"
#include "device/winners/sqlite_stmt.h"
#include "device/winners/winners.h"
#include "tuner/replay/kt_cache.h"

namespace qt::tune {

using winners::Stmt;

namespace {

constexpr const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS device(
  id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, name TEXT NOT NULL, arch TEXT, sm_count INTEGER,
  memory_bytes INTEGER, clock_mhz INTEGER, mem_clock_mhz INTEGER, l2_bytes INTEGER, driver TEXT,
  cuda_version TEXT, nvrtc_version TEXT, qtune_version TEXT);
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
)SQL";

nlohmann::json shape_json(const std::vector<int64_t>& s) { return nlohmann::json(s); }

int64_t device_id(sqlite3* db, const DeviceFingerprint& d) {
  Stmt ins(db,
           "INSERT OR IGNORE INTO device(fingerprint,name,arch,sm_count,memory_bytes,clock_mhz,mem_clock_mhz,"
           "l2_bytes,driver,cuda_version,nvrtc_version,qtune_version) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  ins.bind(1, d.key()).bind(2, d.name).bind(3, d.arch).bind(4, int64_t(d.sm_count)).bind(5, int64_t(d.memory_bytes));
  ins.bind(6, int64_t(d.clock_mhz)).bind(7, int64_t(d.mem_clock_mhz)).bind(8, int64_t(d.l2_bytes)).bind(9, d.driver);
  ins.bind(10, d.cuda_version).bind(11, d.nvrtc_version).bind(12, d.qtune_version);
  ins.step();
  Stmt q(db, "SELECT id FROM device WHERE fingerprint=?");
  q.bind(1, d.key());
  if (!q.step()) throw Error("store: device row vanished", kExitFailure);
  return q.i64(0);
}

int64_t kernel_id(sqlite3* db, const std::string& family, const std::string& hash) {
  Stmt ins(db, "INSERT OR IGNORE INTO kernel(family, source_hash) VALUES(?,?)");
  ins.bind(1, family).bind(2, hash);
  ins.step();
  Stmt q(db, "SELECT id FROM kernel WHERE family=? AND source_hash=?");
  q.bind(1, family).bind(2, hash);
  if (!q.step()) throw Error("store: kernel row vanished", kExitFailure);
  return q.i64(0);
}

std::string canonical_point(const nlohmann::json& p) { return p.dump(); }  // nlohmann sorts object keys

}  // namespace


std::string utc_timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, (long long)ms);
  return out;
}


Store::Store(const std::string& path, const StoreOptions& options) : path_(path), options_(options) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail_file(path, "cannot open the results store: " + msg);
  }
  sqlite3_busy_timeout(db_, 60000);
  try {
    // Switching to WAL needs a brief exclusive lock; several tuners starting together retry it.
    for (int attempt = 0;; ++attempt) {
      char* err = nullptr;
      int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err);
      sqlite3_free(err);
      if (rc == SQLITE_OK) break;
      if (rc != SQLITE_BUSY || attempt > 200) fail_file(path, std::string("not a usable SQLite store: ") + sqlite3_errmsg(db_));
      usleep(10000);
    }
    quick_check_ = winners::quick_check(db_);
    if (quick_check_ != "ok" && options_.warn_if_damaged)
      std::fprintf(stderr, "warning: %s: SQLite reports the store damaged (%s); rows that cannot be read are ignored, "
                   "and nothing is written without --force-write\n", path.c_str(), quick_check_.c_str());
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=ON");
    exec("BEGIN IMMEDIATE");
    try {
      exec(kSchema);
      winners::create_dispatch_schema(db_);
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

void Store::exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail_file(path_, "store: " + msg, kExitFailure);
  }
}

void Store::put(const ResultRow& row) { put_many({row}); }

void Store::check_writable() const {
  if (quick_check_ != "ok" && !options_.force_write)
    fail_file(path_, "SQLite reports the store malformed (" + quick_check_ +
                         "); refusing to write into it (--force-write writes anyway; qtune store export saves the good rows)");
}

size_t Store::put_many(const std::vector<ResultRow>& rows) {
  check_writable();
  size_t inserted = 0;
  exec("BEGIN IMMEDIATE");
  try {
    Stmt ins(db_,
             "INSERT OR IGNORE INTO result(device_id,kernel_id,shape,dtypes,point,status,median_s,mad_s,p20_s,p80_s,"
             "ci_low_s,ci_high_s,n_samples,samples,detail,run_id,created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    std::string now = utc_timestamp();
    for (const ResultRow& r : rows) {
      ins.reset();
      ins.bind(1, device_id(db_, r.device)).bind(2, kernel_id(db_, r.family, r.source_hash));
      ins.bind(3, shape_json(r.shape).dump()).bind(4, r.dtypes).bind(5, canonical_point(r.point));
      ins.bind(6, std::string(status_name(r.status))).bind(7, r.stats.median).bind(8, r.stats.mad);
      ins.bind(9, r.stats.p20).bind(10, r.stats.p80).bind(11, r.stats.ci_low).bind(12, r.stats.ci_high);
      ins.bind(13, int64_t(r.stats.n)).bind(14, nlohmann::json(r.stats.samples).dump()).bind(15, r.detail);
      ins.bind(16, r.run_id).bind(17, r.created_at.empty() ? now : r.created_at);
      ins.step();
      inserted += size_t(sqlite3_changes(db_));  // 0 when OR IGNORE skipped a duplicate
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return inserted;
}

int64_t Store::count() const {
  Stmt q(db_, "SELECT COUNT(*) FROM result");
  q.step();
  return q.i64(0);
}

namespace {

std::string shortened(std::string s) {
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace

std::vector<ResultRow> Store::rows(const std::string& family, std::vector<BadRow>* bad) const {
  std::string sql =
      "SELECT d.name,d.arch,d.sm_count,d.memory_bytes,d.clock_mhz,d.mem_clock_mhz,d.l2_bytes,d.driver,"
      "d.cuda_version,d.nvrtc_version,d.qtune_version,k.family,k.source_hash,r.shape,r.dtypes,r.point,r.status,"
      "r.samples,r.median_s,r.n_samples,r.detail,r.run_id,r.created_at,r.id FROM result r "
      "JOIN device d ON r.device_id=d.id JOIN kernel k ON r.kernel_id=k.id";
  if (!family.empty()) sql += " WHERE k.family=?";
  sql += " ORDER BY r.id";
  Stmt q(db_, sql);
  if (!family.empty()) q.bind(1, family);
  std::vector<ResultRow> out;
  int64_t last_id = 0;
  for (;;) {
    // SQLite stops a scan at a damaged page; the rows read so far stay usable and the rest is reported.
    try {
      if (!q.step()) break;
    } catch (const Error& e) {
      if (bad) bad->push_back({last_id + 1, "the rows after result id " + std::to_string(last_id), e.what()});
      break;
    }
    last_id = q.i64(23);
    ResultRow r;
    r.device.name = q.text(0);
    r.device.arch = q.text(1);
    r.device.sm_count = int(q.i64(2));
    r.device.memory_bytes = uint64_t(q.i64(3));
    r.device.clock_mhz = int(q.i64(4));
    r.device.mem_clock_mhz = int(q.i64(5));
    r.device.l2_bytes = uint64_t(q.i64(6));
    r.device.driver = q.text(7);
    r.device.cuda_version = q.text(8);
    r.device.nvrtc_version = q.text(9);
    r.device.qtune_version = q.text(10);
    r.family = q.text(11);
    r.source_hash = q.text(12);
    r.dtypes = q.text(14);
    // A row whose JSON columns do not parse is reported by key and skipped; the others stay usable.
    try {
      auto shape = nlohmann::json::parse(q.text(13));
      if (!shape.is_array()) throw Error("shape is not an array");
      for (const auto& x : shape)
        if (!x.is_number_integer()) throw Error("shape holds " + x.dump() + ", not an integer");
      r.shape = shape.get<std::vector<int64_t>>();
      r.point = nlohmann::json::parse(q.text(15));
      if (!r.point.is_object()) throw Error("point is not a JSON object");
      r.status = parse_status(q.text(16));
      auto samples_j = nlohmann::json::parse(q.text(17));
      if (!samples_j.is_array()) throw Error("samples is not an array");
      std::vector<double> samples;
      for (const auto& x : samples_j) {
        if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0)
          throw Error("samples hold " + x.dump() + ", not a time");
        samples.push_back(x.get<double>());
      }
      if (!samples.empty()) {
        r.stats = summarize(samples);
      } else {
        r.stats.median = q.f64(18);
        r.stats.n = int(q.i64(19));
      }
    } catch (const std::exception& e) {
      if (bad)
        bad->push_back({q.i64(23),
                        "family " + r.family + ", shape " + shortened(q.text(13)) + ", dtypes " + r.dtypes + ", point " +
                            shortened(q.text(15)),
                        e.what()});
      continue;
    }
    r.detail = q.text(20);
    r.run_id = q.text(21);
    r.created_at = q.text(22);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<Winner> Store::lookup(const DeviceFingerprint& dev, const std::string& family, const std::string& dtypes,
                                    const std::vector<int64_t>& shape, const std::string& hash) const {
  return winners::lookup_winner(db_, dev, family, dtypes, shape, hash);
}

std::vector<ShapeRegret> Store::regrets(const DeviceFingerprint& dev, const std::string& family,
                                        const std::string& dtypes, const std::string& hash) const {
  return winners::shape_regrets(db_, dev, family, dtypes, hash);
}

std::vector<winners::StaleRows> Store::stale(const std::string& family, const std::string& source_hash) const {
  return winners::stale_rows(db_, family, source_hash);
}

nlohmann::json Store::export_json(const std::string& family, std::vector<BadRow>* bad) const {
  nlohmann::json rows_j = nlohmann::json::array();
  for (const ResultRow& r : rows(family, bad)) {
    rows_j.push_back({{"device", r.device.to_json()},
                      {"family", r.family},
                      {"source_hash", r.source_hash},
                      {"shape", r.shape},
                      {"dtypes", r.dtypes},
                      {"point", r.point},
                      {"status", status_name(r.status)},
                      {"stats", stats_to_json(r.stats)},
                      {"detail", r.detail},
                      {"run_id", r.run_id},
                      {"created_at", r.created_at}});
  }
  return {{"format", "qtune-store"}, {"version", 1}, {"results", rows_j}};
}

size_t Store::import_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", "") != "qtune-store" || !j.contains("results") || !j["results"].is_array())
    throw Error("not a qtune store export (expected {\"format\": \"qtune-store\", \"results\": [...]})");
  std::vector<ResultRow> rows_in;
  size_t i = 0;
  for (const auto& e : j["results"]) {
    try {
      ResultRow r;
      r.device = DeviceFingerprint::from_json(e.at("device"));
      r.family = e.at("family").get<std::string>();
      r.source_hash = e.value("source_hash", "");
      r.shape = e.at("shape").get<std::vector<int64_t>>();
      r.dtypes = e.value("dtypes", "");
      r.point = e.at("point");
      r.status = parse_status(e.at("status").get<std::string>());
      r.stats = stats_from_json(e.value("stats", nlohmann::json::object()));
      r.detail = e.value("detail", "");
      r.run_id = e.value("run_id", "");
      r.created_at = e.value("created_at", "");
      if (r.created_at.empty()) throw Error("missing created_at");
      rows_in.push_back(std::move(r));
    } catch (const std::exception& ex) {
      throw Error("store import: result " + std::to_string(i) + ": " + ex.what());
    }
    ++i;
  }
  return put_many(rows_in);  // counted inside the transaction: other tuners may be writing meanwhile
}

size_t Store::import_kt_cache(const std::string& path) {
  RecordedSpace rs = load_kt_cache(path);
  // The run id names the cache's content: importing the same cache again (under any file name) adds nothing.
  const std::string run = "kt:" + rs.content_sha256.substr(0, 16);
  {
    Stmt q(db_, "SELECT COUNT(*) FROM result WHERE run_id=?");
    q.bind(1, run);
    q.step();
    if (q.i64(0) > 0) return 0;
  }
  std::vector<ResultRow> rows_in;
  DeviceFingerprint dev;
  dev.name = rs.device_name;
  const std::vector<int64_t>& shape = rs.problem_shape;
  std::string stamp = utc_timestamp();
  for (PointId id = 0; id < rs.space.size(); ++id) {
    const RecordedPoint& p = rs.points[id];
    ResultRow r;
    r.device = dev;
    r.family = rs.kernel_name;
    r.source_hash = "kernel_tuner";
    r.shape = shape;
    r.point = nlohmann::json::parse(rs.space.point_json(id));
    r.status = p.status;
    std::vector<double> s;
    for (double t : p.times_ms) s.push_back(t / 1000.0);
    if (p.status == Status::Ok) {
      if (s.empty()) s.push_back(p.time_ms / 1000.0);
      r.stats = summarize(s);
    }
    r.detail = p.failure;
    r.run_id = run;
    r.created_at = stamp;
    rows_in.push_back(std::move(r));
  }
  return put_many(rows_in);
}

std::string Store::integrity_check() const {
  try {
    Stmt q(db_, "PRAGMA integrity_check");
    std::string out;
    while (q.step()) out += (out.empty() ? "" : "; ") + q.text(0);
    return out;
  } catch (const Error& e) {
    return e.what();  // the check itself failed on a broken file: that is its finding
  }
}

void Store::put_dispatch(const DeviceFingerprint& dev, const std::string& op, const std::string& weight_type,
                         const std::vector<int64_t>& rest, const std::vector<winners::DispatchEntry>& entries,
                         const std::string& run_id) {
  check_writable();
  winners::put_dispatch(db_, dev, op, weight_type, rest, entries, run_id);
}

std::vector<winners::DispatchEntry> Store::dispatch(const DeviceFingerprint& dev, const std::string& op,
                                                    const std::string& weight_type,
                                                    const std::vector<int64_t>& rest) const {
  return winners::read_dispatch(db_, dev, op, weight_type, rest);
}

}  // namespace qt::tune
