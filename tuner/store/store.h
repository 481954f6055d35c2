#pragma once
// The results store: one SQLite file in WAL mode shared by any number of tuner processes. Every measured
// candidate is a row keyed by device fingerprint, kernel family + source hash, shape, dtypes and point,
// with its status, statistics and raw samples; the measured batch dispatch of each linear shape sits beside
// them. Each write is one IMMEDIATE transaction, so a process killed at any moment (kill -9) leaves either
// the whole write or nothing, and writers queue on the lock (busy timeout) instead of failing.
//
// The schema and the codec of every row live in device/winners/store_schema.h, shared with the runtime's
// read-only winners table; this class is the tuner's writer around them. Lookups here match devices
// exactly (a resumed run, the prior of another device); the runtime's same-model rule is in winners.h.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result_status.h"
#include "common/sample_stats.h"
#include "device/winners/store_schema.h"
#include "device/winners/winners.h"

struct sqlite3;

namespace qt::tune {

using qt::Status;
using qt::Stats;
using qt::summarize;
using winners::BadRow;
using winners::DeviceFingerprint;
using winners::ResultRow;
using winners::ShapeRegret;
using winners::Winner;
using winners::shape_distance;

struct StoreOptions {
  // Print one warning on stderr, naming the store, when SQLite's quick check fails at open.
  bool warn_if_damaged = true;
  // Write even into a store SQLite reports malformed (otherwise put() refuses with an error).
  bool force_write = false;
  // Only read (qtune store check, export, lookup): opened read-only, so a store this user may not write (a
  // read-only file or folder) is still read; every write throws.
  bool read_only = false;
};

class Store {
 public:
  // Creates the schema in a new or empty file, upgrades an older store; throws qt::Error (exit 2) for a
  // file that is no qtune store or one of a later version. Runs SQLite's quick check once (StoreOptions).
  explicit Store(const std::string& path, const StoreOptions& options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Both refuse (qt::Error) when the quick check at open failed, unless StoreOptions::force_write.
  void put(const ResultRow& row);
  void check_writable() const;  // the refusal put() would give, for callers that fail before doing work
  // One transaction; returns how many rows were new (identical rows already stored are skipped).
  size_t put_many(const std::vector<ResultRow>& rows);
  // The rows that parse; the others are skipped and, when `bad` is given, listed there.
  std::vector<ResultRow> rows(const std::string& family = "", std::vector<BadRow>* bad = nullptr) const;
  int64_t count() const;
  std::vector<winners::StoredDevice> devices() const;
  // Every row of every table that cannot be decoded.
  std::vector<BadRow> bad_rows() const;

  std::optional<Winner> lookup(const DeviceFingerprint& dev, const std::string& family, const std::string& dtypes,
                               const std::vector<int64_t>& shape, const std::string& source_hash = "") const;
  std::vector<ShapeRegret> regrets(const DeviceFingerprint& dev, const std::string& family,
                                   const std::string& dtypes, const std::string& source_hash = "") const;

  // {"format": "qtune-store", "version": 2, "results": [...], "dispatch": [...]}: the rows that decode.
  nlohmann::json export_json(const std::string& family = "", std::vector<BadRow>* bad = nullptr) const;
  // Idempotent: rows already present are skipped, dispatch entries replace those of their key. Reads
  // version 1 exports (results only). Returns the count of new results.
  size_t import_json(const nlohmann::json& j);
  // Kernel Tuner cache: device = name only, family = kernel_name, shape = problem_size, times ms -> s.
  size_t import_kt_cache(const std::string& path);

  // Rows stored for `family` under another source hash than `source_hash`, per (hash, device name).
  std::vector<winners::StaleRows> stale(const std::string& family, const std::string& source_hash) const;

  // The batch dispatch of one linear shape (device/winners/dispatch.h), replacing what was stored for the key.
  void put_dispatch(const DeviceFingerprint& dev, const std::string& op, const std::string& weight_type,
                    const std::vector<int64_t>& rest, const std::vector<winners::DispatchEntry>& entries,
                    const std::string& run_id);
  std::vector<winners::DispatchEntry> dispatch(const DeviceFingerprint& dev, const std::string& op,
                                               const std::string& weight_type, const std::vector<int64_t>& rest) const;
  std::vector<winners::DispatchRow> dispatch_rows(std::vector<BadRow>* bad = nullptr) const;

  std::string integrity_check() const;  // "ok" when the file is consistent
  const std::string& quick_check() const { return quick_check_; }  // PRAGMA quick_check at open ("ok")
  const std::string& path() const { return path_; }

 private:
  std::vector<int64_t> device_ids(const DeviceFingerprint& dev) const;  // rows of exactly this device
  std::string path_;
  sqlite3* db_ = nullptr;
  StoreOptions options_;
  std::string quick_check_ = "ok";
};

using winners::utc_timestamp;

}  // namespace qt::tune
