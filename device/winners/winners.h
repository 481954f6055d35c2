#pragma once
// The winners table: the read side of a tuning store (one SQLite file written by qtune), small enough for the
// runtime to link. A winner is looked up by device, family, dtypes, source hash and shape.
//
// Which rows serve a device: those measured on it (every fingerprint field equal); else those of the same GPU
// model (name, architecture, SM count, memory) measured under another driver, toolkit or qtune version, or
// with other clocks (the most recently measured such device), which the runtime uses and reports in one line;
// else none, and the line names the devices the store does hold.
//
// The nearest-shape rule: for (device, family, dtypes[, source hash]) and a requested shape, the winner is the
// fastest row with status "ok" at exactly that shape. If that shape was never tuned, the donor is the tuned
// shape with the same number of dimensions that minimises sum_i |log2(requested_i) - log2(tuned_i)|; ties go
// to the larger shape, then to the lexicographically smaller one. The fallback's measured regret, where known,
// is the leave-one-out regret at the donor: how much slower the winner of the donor's own nearest tuned
// neighbour was, measured at the donor (t(neighbour's winner at donor) / t(donor's winner) - 1). Unknown when
// that point was not measured there.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/winners/dispatch.h"
#include "device/winners/fingerprint.h"
#include "device/winners/store_schema.h"

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

// How a device that runs found its rows in a store.
struct DeviceMatch {
  enum class Kind { Exact, SameModel, None } kind = Kind::None;
  std::vector<int64_t> device_ids;  // the device rows whose results serve it
  DeviceFingerprint measured_on;    // Exact/SameModel: the fingerprint of those rows
  std::vector<DeviceFingerprint> held;  // every device the store holds
};
// Exact: every device row equal to `live`; else SameModel: the same-model device measured most recently.
DeviceMatch match_device(sqlite3* db, const DeviceFingerprint& live, std::vector<BadRow>* bad = nullptr);
// One line for the runtime: "" for an exact match; otherwise which device's winners are used (and what
// differs), or that the store holds none for this device and which devices it does hold.
std::string match_line(const DeviceMatch& m, const DeviceFingerprint& live, const std::string& path);

// The nearest-shape rule over the results of `device_ids` ("" hash: any source hash). Unreadable rows are
// skipped and appended to `bad`.
std::optional<Winner> lookup_winner(sqlite3* db, const std::vector<int64_t>& device_ids, const std::string& family,
                                    const std::string& dtypes, const std::vector<int64_t>& shape,
                                    const std::string& source_hash, std::vector<BadRow>* bad = nullptr);
std::vector<ShapeRegret> shape_regrets(sqlite3* db, const std::vector<int64_t>& device_ids, const std::string& family,
                                       const std::string& dtypes, const std::string& source_hash);

// Result rows stored for `family` under a source hash other than `source_hash`: made from other sources, so
// never used. One entry per (hash, device name) with its row count.
struct StaleRows {
  std::string source_hash, device_name;
  int64_t rows = 0;
};
std::vector<StaleRows> stale_rows(sqlite3* db, const std::string& family, const std::string& source_hash);

// The measured ranking for a batch of `m` rows of a linear shape (`rest`: its dims after M) on `device`, from
// the bucket that serves m (dispatch.h); nullopt when the store holds none for the key.
std::optional<DispatchEntry> dispatch_for(sqlite3* db, const DeviceFingerprint& device, const std::string& op,
                                          const std::string& weight_type, const std::vector<int64_t>& rest, int64_t m,
                                          std::vector<BadRow>* bad = nullptr);

// `path` opened read-only with its schema checked, for readers that never write (a WAL store in a folder this
// user cannot write is read as an immutable file). `immutable`: always so, for a reader that must leave no
// -shm or -wal file beside the store (it then sees only what the last writer checkpointed, as every store
// closed by qtune is). Throws qt::Error (exit 2) naming the file.
sqlite3* open_store_read_only(const std::string& path, bool immutable = false);
// `path` opened for writing (created when absent) with its schema in place and in WAL mode, for every writer
// (the tuner, qbench --choose-decode): a folder, FIFO, missing or unwritable folder, a read-only file, or a file
// that is no store is refused untouched. Throws qt::Error (exit 2) naming the file.
sqlite3* open_store_read_write(const std::string& path);

// A store opened read-only, for the runtime. A store that fails SQLite's quick check, or holds rows that
// cannot be read, gets one warning on stderr naming it and the count; lookups ignore the bad rows.
class WinnersTable {
 public:
  explicit WinnersTable(const std::string& path);  // throws qt::Error (exit 2) if it is not a qtune store
  ~WinnersTable();
  WinnersTable(const WinnersTable&) = delete;
  WinnersTable& operator=(const WinnersTable&) = delete;

  const std::string& path() const { return path_; }
  // Which rows serve `live` (computed once per device).
  const DeviceMatch& match(const DeviceFingerprint& live) const;
  std::optional<Winner> lookup(const DeviceFingerprint& live, const std::string& family, const std::string& dtypes,
                               const std::vector<int64_t>& shape, const std::string& source_hash) const;
  std::vector<StaleRows> stale(const std::string& family, const std::string& source_hash) const;
  std::optional<DispatchEntry> dispatch(const DeviceFingerprint& live, const std::string& op,
                                        const std::string& weight_type, const std::vector<int64_t>& rest,
                                        int64_t m) const;

 private:
  void note_bad(const std::vector<BadRow>& bad) const;
  std::string path_;
  sqlite3* db_ = nullptr;
  mutable std::map<std::string, DeviceMatch> matches_;  // by live key
  mutable bool warned_ = false;
};

}  // namespace qt::winners
