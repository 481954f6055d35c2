#pragma once
// The winners table: the read side of a tuning store (one SQLite file written by qtune), small enough for the
// runtime to link. A winner is looked up by device fingerprint, family, dtypes, source hash and shape.
//
// The nearest-shape rule: for (device fingerprint, family, dtypes[, source hash]) and a requested shape, the
// winner is the fastest row with status "ok" at exactly that shape. If that shape was never tuned, the donor is
// the tuned shape with the same number of dimensions that minimises sum_i |log2(requested_i) - log2(tuned_i)|;
// ties go to the larger shape, then to the lexicographically smaller one. The fallback's measured regret, where
// known, is the leave-one-out regret at the donor: how much slower the winner of the donor's own nearest tuned
// neighbour was, measured at the donor (t(neighbour's winner at donor) / t(donor's winner) - 1). Unknown when
// that point was not measured there.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/winners/dispatch.h"
#include "device/winners/fingerprint.h"

struct sqlite3;

namespace qt::winners {

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

double shape_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// SQLite's PRAGMA quick_check: "ok", or what it found (also when the check itself fails on a broken file).
std::string quick_check(sqlite3* db);

// The rule above on an open store connection ("" hash: any source hash). Rows whose shape, point or time
// cannot be read (a damaged store) are skipped; `skipped`, when given, is increased by their number.
std::optional<Winner> lookup_winner(sqlite3* db, const DeviceFingerprint& dev, const std::string& family,
                                    const std::string& dtypes, const std::vector<int64_t>& shape,
                                    const std::string& source_hash, int64_t* skipped = nullptr);
std::vector<ShapeRegret> shape_regrets(sqlite3* db, const DeviceFingerprint& dev, const std::string& family,
                                       const std::string& dtypes, const std::string& source_hash);

// Result rows stored for `family` under a source hash other than `source_hash`: made from other sources, so
// never used. One entry per (hash, device name) with its row count.
struct StaleRows {
  std::string source_hash, device_name;
  int64_t rows = 0;
};
std::vector<StaleRows> stale_rows(sqlite3* db, const std::string& family, const std::string& source_hash);

// A store opened read-only, for the runtime. A store that fails SQLite's quick check, or holds rows that
// cannot be read, gets one warning on stderr naming it; lookups ignore the bad rows.
class WinnersTable {
 public:
  explicit WinnersTable(const std::string& path);  // throws qt::Error (exit 2) if it is not a qtune store
  ~WinnersTable();
  WinnersTable(const WinnersTable&) = delete;
  WinnersTable& operator=(const WinnersTable&) = delete;

  std::optional<Winner> lookup(const DeviceFingerprint& dev, const std::string& family, const std::string& dtypes,
                               const std::vector<int64_t>& shape, const std::string& source_hash) const;
  std::vector<StaleRows> stale(const std::string& family, const std::string& source_hash) const;
  // The measured ranking for a batch of `m` rows of a linear shape (`rest`: its dims after M), from the
  // bucket that serves m (dispatch.h); nullopt when the store holds none for the key.
  std::optional<DispatchEntry> dispatch(const DeviceFingerprint& dev, const std::string& op, const std::string& weight_type,
                                        const std::vector<int64_t>& rest, int64_t m) const;

 private:
  void warn_once(const std::string& why) const;
  std::string path_;
  sqlite3* db_ = nullptr;
  mutable bool warned_ = false;
};

}  // namespace qt::winners
