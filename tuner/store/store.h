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

#include "tuner/core/status.h"
#include "tuner/measure/protocol.h"

struct sqlite3;

namespace qt::tune {

struct DeviceFingerprint {
  std::string name;     // "NVIDIA A100-PCIE-40GB", "cpu: AMD EPYC ..."
  std::string arch;     // "sm_80", "x86_64-avx2"
  int sm_count = 0;     // SMs, or CPU cores
  uint64_t memory_bytes = 0;
  int clock_mhz = 0, mem_clock_mhz = 0;
  uint64_t l2_bytes = 0;
  std::string driver, cuda_version, nvrtc_version, qtune_version;

  std::string key() const;  // canonical text of every field; rows match devices by it
  nlohmann::json to_json() const;
  static DeviceFingerprint from_json(const nlohmann::json& j);
};

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

struct Winner {
  nlohmann::json point;
  double median_s = 0;
  std::vector<int64_t> shape;  // the shape the winner was measured at (the donor on a fallback)
  bool exact = true;
  double distance = 0;  // sum |log2| between the requested shape and the donor
  std::optional<double> fallback_regret;  // leave-one-out regret at the donor, if measured
};

struct ShapeRegret {
  std::vector<int64_t> shape, neighbour;
  std::optional<double> regret;
};

class Store {
 public:
  explicit Store(const std::string& path);  // creates the schema if needed; throws qt::Error
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void put(const ResultRow& row);
  // One transaction; returns how many rows were new (identical rows already stored are skipped).
  size_t put_many(const std::vector<ResultRow>& rows);
  std::vector<ResultRow> rows(const std::string& family = "") const;
  int64_t count() const;

  std::optional<Winner> lookup(const DeviceFingerprint& dev, const std::string& family, const std::string& dtypes,
                               const std::vector<int64_t>& shape, const std::string& source_hash = "") const;
  std::vector<ShapeRegret> regrets(const DeviceFingerprint& dev, const std::string& family,
                                   const std::string& dtypes, const std::string& source_hash = "") const;

  nlohmann::json export_json(const std::string& family = "") const;
  size_t import_json(const nlohmann::json& j);  // idempotent: rows already present are skipped
  // Kernel Tuner cache: device = name only, family = kernel_name, shape = problem_size, times ms -> s.
  size_t import_kt_cache(const std::string& path);

  std::string integrity_check() const;  // "ok" when the file is consistent
  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql) const;
  std::string path_;
  sqlite3* db_ = nullptr;
};

std::string utc_timestamp();
double shape_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace qt::tune
