#include "tuner/store/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "common/error.h"
#include "common/paths.h"
#include "device/winners/dispatch.h"
#include "device/winners/sqlite_stmt.h"
#include "tuner/replay/kt_cache.h"

namespace qt::tune {

using winners::Stmt;

Store::Store(const std::string& path, const StoreOptions& options) : path_(path), options_(options) {
  // A folder or a FIFO: SQLite would say "unable to open database file" or "disk I/O error".
  if (const std::string why = regular_file_problem(path); !why.empty() && why != "no such file") fail_file(path, why);
  if (options_.read_only) {
    db_ = winners::open_store_read_only(path);
    quick_check_ = winners::quick_check(db_);
    if (quick_check_ != "ok" && options_.warn_if_damaged)
      std::fprintf(stderr, "warning: %s: SQLite reports the store damaged (%s); rows that cannot be read are ignored\n",
                   path.c_str(), quick_check_.c_str());
    return;
  }
  db_ = winners::open_store_read_write(path);
  quick_check_ = winners::quick_check(db_);
  if (quick_check_ != "ok" && options_.warn_if_damaged)
    std::fprintf(stderr, "warning: %s: SQLite reports the store damaged (%s); rows that cannot be read are ignored, "
                 "and nothing is written without --force-write\n", path.c_str(), quick_check_.c_str());
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

void Store::put(const ResultRow& row) { put_many({row}); }

void Store::check_writable() const {
  if (options_.read_only) fail_file(path_, "opened read-only: nothing is written");
  if (quick_check_ != "ok" && !options_.force_write)
    fail_file(path_, "SQLite reports the store malformed (" + quick_check_ +
                         "); refusing to write into it (--force-write writes anyway; qtune store export saves the good rows)");
}

size_t Store::put_many(const std::vector<ResultRow>& rows) {
  check_writable();
  size_t added = 0;
  winners::in_transaction(db_, [&] { added = winners::put_results(db_, rows); });
  return added;
}

int64_t Store::count() const {
  Stmt q(db_, "SELECT COUNT(*) FROM result");
  q.step();
  return q.i64(0);
}

std::vector<ResultRow> Store::rows(const std::string& family, std::vector<BadRow>* bad) const {
  winners::ResultQuery q;
  q.family = family;
  return winners::read_results(db_, q, bad);
}

std::vector<winners::StoredDevice> Store::devices() const { return winners::read_devices(db_); }

std::vector<BadRow> Store::bad_rows() const {
  std::vector<BadRow> bad;
  winners::read_devices(db_, &bad);
  // read_results reports unreadable device rows again as the reason of their results; keep one of each.
  std::vector<BadRow> more;
  winners::read_results(db_, {}, &more);
  winners::read_dispatch_rows(db_, {}, &more);
  for (BadRow& b : more)
    if (b.table != "device") bad.push_back(std::move(b));
  return bad;
}

std::vector<int64_t> Store::device_ids(const DeviceFingerprint& dev) const {
  std::vector<int64_t> ids;
  for (const winners::StoredDevice& d : winners::read_devices(db_))
    if (d.fingerprint == dev) ids.push_back(d.id);
  return ids;
}

std::optional<Winner> Store::lookup(const DeviceFingerprint& dev, const std::string& family, const std::string& dtypes,
                                    const std::vector<int64_t>& shape, const std::string& hash) const {
  return winners::lookup_winner(db_, device_ids(dev), family, dtypes, shape, hash);
}

std::vector<ShapeRegret> Store::regrets(const DeviceFingerprint& dev, const std::string& family,
                                        const std::string& dtypes, const std::string& hash) const {
  return winners::shape_regrets(db_, device_ids(dev), family, dtypes, hash);
}

std::vector<winners::StaleRows> Store::stale(const std::string& family, const std::string& source_hash) const {
  return winners::stale_rows(db_, family, source_hash);
}

nlohmann::json Store::export_json(const std::string& family, std::vector<BadRow>* bad) const {
  nlohmann::json results = nlohmann::json::array(), dispatch = nlohmann::json::array();
  for (const ResultRow& r : rows(family, bad)) results.push_back(r.to_json());
  // A family filter exports the dispatch rankings that name it.
  for (const winners::DispatchRow& d : dispatch_rows(bad)) {
    bool names = family.empty();
    for (const winners::Ranked& r : d.ranking) names = names || r.family == family;
    if (names) dispatch.push_back(d.to_json());
  }
  return {{"format", "qtune-store"}, {"version", winners::kStoreVersion}, {"results", results}, {"dispatch", dispatch}};
}

size_t Store::import_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", "") != "qtune-store" || !j.contains("results") || !j["results"].is_array())
    throw Error("not a qtune store export (expected {\"format\": \"qtune-store\", \"results\": [...]})");
  if (j.contains("version") && (!j["version"].is_number_integer() || j["version"].get<int64_t>() < 1 ||
                                j["version"].get<int64_t>() > winners::kStoreVersion))
    throw Error("store import: export version " + j["version"].dump() + " is not one this build reads (1 to " +
                std::to_string(winners::kStoreVersion) + ")");
  std::vector<ResultRow> rows_in;
  size_t i = 0;
  for (const auto& e : j["results"]) {
    try {
      rows_in.push_back(ResultRow::from_json(e));
    } catch (const std::exception& ex) {
      throw Error("store import: result " + std::to_string(i) + ": " + ex.what());
    }
    ++i;
  }
  std::vector<winners::DispatchRow> dispatch_in;
  if (j.contains("dispatch")) {
    if (!j["dispatch"].is_array()) throw Error("store import: dispatch is not an array");
    i = 0;
    for (const auto& e : j["dispatch"]) {
      try {
        dispatch_in.push_back(winners::DispatchRow::from_json(e));
        const winners::DispatchRow& d = dispatch_in.back();
        // A ranking names each contender once; a decode step's ranks the decode variants (dispatch.h) of a model
        // shape (runtime/cli/decode_choice.h: 9 dims).
        std::set<std::string> seen;
        for (const winners::Ranked& r : d.ranking)
          if (!seen.insert(r.family).second) throw Error("ranking names '" + r.family + "' twice");
        if (d.op == winners::kDecodeStepOp) {
          if (d.shape.size() != 9) throw Error("a decode.step shape has 9 dims, not " + std::to_string(d.shape.size()));
          for (const winners::Ranked& r : d.ranking)
            if (!winners::is_decode_variant_name(r.family))
              throw Error("'" + r.family.substr(0, 80) + "' is no decode variant");
        }
      } catch (const std::exception& ex) {
        throw Error("store import: dispatch " + std::to_string(i) + ": " + ex.what());
      }
      ++i;
    }
  }
  check_writable();
  size_t added = 0;
  // One transaction for both tables: an import is all or nothing.
  winners::in_transaction(db_, [&] {
    added = winners::put_results(db_, rows_in);
    // A dispatch row's device too: a runtime matches its device against the store's devices before it reads a
    // ranking, and an export may hold rankings of a device without results (qbench --choose-decode's).
    for (const winners::DispatchRow& d : dispatch_in) winners::put_device(db_, d.device);
    winners::put_dispatch_rows(db_, dispatch_in);
  });
  return added;  // counted inside the transaction: other tuners may be writing meanwhile
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
  std::vector<winners::DispatchRow> rows;
  for (const winners::DispatchEntry& e : entries) rows.push_back({dev, op, weight_type, rest, e.bucket, e.ranking, run_id});
  winners::in_transaction(db_, [&] { winners::put_dispatch_rows(db_, rows); });
}

std::vector<winners::DispatchEntry> Store::dispatch(const DeviceFingerprint& dev, const std::string& op,
                                                    const std::string& weight_type,
                                                    const std::vector<int64_t>& rest) const {
  winners::DispatchQuery q;
  q.device = dev;
  q.op = op;
  q.weight_type = weight_type;
  q.shape = rest;
  std::vector<winners::DispatchEntry> out;
  for (const winners::DispatchRow& r : winners::read_dispatch_rows(db_, q)) out.push_back({r.bucket, r.ranking});
  return out;
}

std::vector<winners::DispatchRow> Store::dispatch_rows(std::vector<BadRow>* bad) const {
  return winners::read_dispatch_rows(db_, {}, bad);
}

}  // namespace qt::tune
