#pragma once
// The results store: one SQLite file in WAL mode shared by any number of tuner processes. Every measured
// candidate is a row keyed by device fingerprint, kernel family + source hash, shape, dtypes and point,
// with its status, statistics and raw samples. Each write is one IMMEDIATE transaction, so a process
// killed at any moment (kill -9) leaves either the whole row or nothing, and writers queue on the lock
// (busy timeout) instead of failing.
//
// Winner lookup (the nearest-shape rule): for (device fingerprint, family, dtypes[, source hash]) and a
// requested shape, the winner is the fastest row with status "ok" at exactly that shape. If that shape
// was never tuned, the donor is the tuned shape with the same number of dimensions that minimises
// sum_i |log2(requested_i) - log2(tuned_i)|; ties go to the larger shape, then to the lexicographically
// smaller one. The fallback's measured regret, where known, is the leave-one-out regret at the donor:
// how much slower the winner of the donor's own nearest tuned neighbour was, measured at the donor
// (t(neighbour's winner at donor) / t(donor's winner) - 1). Unknown when that point was not measured there.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/winners/winners.h"
#include "tuner/core/status.h"
#include "tuner/measure/protocol.h"

struct sqlite3;

namespace qt::tune {

using winners::DeviceFingerprint;
using winners::ShapeRegret;
using winners::Winner;
using winners::shape_distance;

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
  std::string created_at;  // ISO 8601 UTC; filled by put() when empty
};

// A result row that cannot be read back (corrupted JSON, unknown status, ...): its id and key, and why.
struct BadRow {
  int64_t id = 0;
  std::string key;  // family, shape, dtypes and point as stored (shortened)
  std::string problem;
};

struct StoreOptions {
  // Print one warning on stderr, naming the store, when SQLite's quick check fails at open.
  bool warn_if_damaged = true;
  // Write even into a store SQLite reports malformed (otherwise put() refuses with an error).
  bool force_write = false;
};

class Store {
 public:
  // Creates the schema if needed; throws qt::Error. Runs SQLite's quick check once (see StoreOptions).
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

  std::optional<Winner> lookup(const DeviceFingerprint& dev, const std::string& family, const std::string& dtypes,
                               const std::vector<int64_t>& shape, const std::string& source_hash = "") const;
  std::vector<ShapeRegret> regrets(const DeviceFingerprint& dev, const std::string& family,
                                   const std::string& dtypes, const std::string& source_hash = "") const;

  nlohmann::json export_json(const std::string& family = "", std::vector<BadRow>* bad = nullptr) const;
  size_t import_json(const nlohmann::json& j);  // idempotent: rows already present are skipped
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

  std::string integrity_check() const;  // "ok" when the file is consistent
  const std::string& quick_check() const { return quick_check_; }  // PRAGMA quick_check at open ("ok")
  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql) const;
  std::string path_;
  sqlite3* db_ = nullptr;
  StoreOptions options_;
  std::string quick_check_ = "ok";
};

std::string utc_timestamp();

}  // namespace qt::tune
