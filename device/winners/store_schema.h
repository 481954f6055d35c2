#pragma once
// The tuning store's whole SQLite schema and the codec of every table's rows, in one place: the tuner's
// writer (tuner/store/store.h) and the runtime's read-only winners table (winners.h) both go through it, so
// a column or a field is written and read by one piece of code.
//
// Tables (schema version kStoreVersion, kept in PRAGMA user_version):
//   device   (id, fingerprint UNIQUE, one column per fingerprint field): the fingerprint column, the
//            canonical JSON of device_fingerprint.h, is the identity; the other columns repeat its fields
//            for people reading the file and are never read back;
//   kernel   (id, family, source_hash);
//   result   (one measured candidate: device, kernel, shape, dtypes, point, status, statistics, samples, ...);
//   dispatch (per device, linear op, weight type, shape without M and batch bucket: the families ranked by
//            their measured time, device/winners/dispatch.h).
// Version 1 (user_version 0) lacked the bus_width_bits column; a writer upgrades it in place, a reader reads
// it as it is. A file with tables of its own but none of these is no store, and a store of a later version
// than this build knows is refused: both with one line naming the file.
//
// Every row is validated when read. A row that does not decode is skipped and reported as a BadRow (the
// table, its id, its key as stored and what is wrong), never half used.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result_status.h"
#include "common/sample_stats.h"
#include "device/api/device_fingerprint.h"

namespace qt::winners {

using dev::DeviceFingerprint;

constexpr int kStoreVersion = 2;

enum class OpenMode { ReadOnly, ReadWrite };

// Checks the schema of an open store; ReadWrite also creates it in an empty file and upgrades an older
// version. Throws qt::Error with exit code 2, naming `path`, for a file that is no qtune store or one
// written by a later version.
void prepare_schema(sqlite3* db, const std::string& path, OpenMode mode);

// SQLite's PRAGMA quick_check as one line: "ok", or its first finding and how many more there are.
std::string quick_check(sqlite3* db);

// "2026-11-27T10:00:00.123Z": when a row was written.
std::string utc_timestamp();

// A row that could not be decoded: where it is, what it holds (shortened), and why it was left out.
struct BadRow {
  std::string table;  // "device", "result", "dispatch"
  int64_t id = 0;     // rowid
  std::string key;
  std::string problem;
  std::string text() const;  // "result id 7 (family ..., shape ...): samples hold "x", not a time"
};

// ---- device ----
struct StoredDevice {
  int64_t id = 0;
  DeviceFingerprint fingerprint;
};
// The device row of `d` (its id), inserting it when no row holds an equal fingerprint.
int64_t put_device(sqlite3* db, const DeviceFingerprint& d);
std::vector<StoredDevice> read_devices(sqlite3* db, std::vector<BadRow>* bad = nullptr);

// ---- result ----
struct ResultRow {
  DeviceFingerprint device;
  std::string family, source_hash;
  std::vector<int64_t> shape;
  std::string dtypes;
  nlohmann::json point = nlohmann::json::object();
  Status status = Status::Ok;
  Stats stats;  // seconds
  std::string detail;
  std::string run_id;
  std::string created_at;  // ISO 8601 UTC; put_results() fills it when empty
  nlohmann::json to_json() const;  // the export form
  static ResultRow from_json(const nlohmann::json& j);  // throws qt::Error naming the field
};

struct ResultQuery {
  std::string family;                 // "" = every family
  std::optional<std::vector<int64_t>> device_ids;  // unset = every device
  std::string dtypes, source_hash;    // "" = any
  bool ok_only = false;               // status 'ok' rows only (winner lookups)
};
// Writers run inside in_transaction() (below), so that a write is all or nothing.
// Inserts the rows; identical rows already stored are skipped. Returns how many were new.
size_t put_results(sqlite3* db, const std::vector<ResultRow>& rows);
std::vector<ResultRow> read_results(sqlite3* db, const ResultQuery& q, std::vector<BadRow>* bad = nullptr);

// ---- dispatch ----
struct Ranked {
  std::string family;  // store name, "<device>.<family>"
  double median_s = 0;
};
struct DispatchRow {
  DeviceFingerprint device;
  std::string op, weight_type;
  std::vector<int64_t> shape;  // the linear shape's dims after M
  int64_t bucket = 0;          // M
  std::vector<Ranked> ranking;  // fastest first, never empty
  std::string run_id;
  nlohmann::json to_json() const;
  static DispatchRow from_json(const nlohmann::json& j);  // throws qt::Error naming the field
};
struct DispatchQuery {
  std::optional<DeviceFingerprint> device;  // unset = every device
  std::string op, weight_type;              // "" = any
  std::optional<std::vector<int64_t>> shape;
};
// Replaces every row of each (device, op, weight type, shape) key that `rows` holds, in one transaction.
void put_dispatch_rows(sqlite3* db, const std::vector<DispatchRow>& rows);
std::vector<DispatchRow> read_dispatch_rows(sqlite3* db, const DispatchQuery& q, std::vector<BadRow>* bad = nullptr);

// Runs `work` inside BEGIN IMMEDIATE ... COMMIT, rolling back when it throws.
template <class Work>
void in_transaction(sqlite3* db, Work&& work);

void exec_sql(sqlite3* db, const std::string& sql);  // throws qt::Error with SQLite's message

template <class Work>
void in_transaction(sqlite3* db, Work&& work) {
  exec_sql(db, "BEGIN IMMEDIATE");
  try {
    work();
    exec_sql(db, "COMMIT");
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace qt::winners
