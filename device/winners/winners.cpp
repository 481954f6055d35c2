#include "device/winners/winners.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "device/winners/sqlite_stmt.h"

namespace qt::winners {

namespace {

// Rows of one (device, family, dtypes[, hash]) as shape -> list of (point, median, status).
struct Measured {
  std::string point;
  double median;
};
using ByShape = std::map<std::vector<int64_t>, std::vector<Measured>>;

ByShape measured_by_shape(sqlite3* db, const DeviceFingerprint& dev, const std::string& family,
                          const std::string& dtypes, const std::string& hash, int64_t* skipped) {
  std::string sql =
      "SELECT r.shape, r.point, r.median_s FROM result r JOIN device d ON r.device_id=d.id "
      "JOIN kernel k ON r.kernel_id=k.id WHERE d.fingerprint=? AND k.family=? AND r.dtypes=? AND r.status='ok'";
  if (!hash.empty()) sql += " AND k.source_hash=?";
  Stmt q(db, sql);
  q.bind(1, dev.key()).bind(2, family).bind(3, dtypes);
  if (!hash.empty()) q.bind(4, hash);
  ByShape out;
  for (;;) {
    // SQLite stops a scan at a damaged page: the rows read so far still count, the rest are skipped.
    try {
      if (!q.step()) break;
    } catch (const Error&) {
      if (skipped) ++*skipped;
      break;
    }
    // A damaged row (text that is not a shape or a point, a time that is not one) never becomes a winner.
    auto shape = nlohmann::json::parse(q.text(0), nullptr, false);
    auto point = nlohmann::json::parse(q.text(1), nullptr, false);
    double median = q.f64(2);
    bool shape_ok = shape.is_array() && std::all_of(shape.begin(), shape.end(), [](const nlohmann::json& x) {
      return x.is_number_integer();
    });
    if (!shape_ok || !point.is_object() || !std::isfinite(median) || median < 0) {
      if (skipped) ++*skipped;
      continue;
    }
    out[shape.get<std::vector<int64_t>>()].push_back({q.text(1), median});
  }
  return out;
}

const Measured* best_of(const std::vector<Measured>& v) {
  const Measured* b = nullptr;
  for (const auto& m : v)
    if (!b || m.median < b->median) b = &m;
  return b;
}

// The tuned shape nearest to `want` among `shapes` (excluding `exclude`), by the documented rule.
std::optional<std::vector<int64_t>> nearest(const ByShape& shapes, const std::vector<int64_t>& want,
                                            const std::vector<int64_t>* exclude) {
  std::optional<std::vector<int64_t>> best;
  double best_d = 0, best_size = 0;
  for (const auto& [s, rows] : shapes) {
    if (s.size() != want.size() || (exclude && s == *exclude)) continue;
    double d = shape_distance(s, want);
    double size = 0;
    for (int64_t x : s) size += std::log2(double(std::max<int64_t>(1, x)));
    bool better = !best || d < best_d - 1e-12 ||
                  (std::fabs(d - best_d) <= 1e-12 && (size > best_size + 1e-12 ||
                                                      (std::fabs(size - best_size) <= 1e-12 && s < *best)));
    if (better) best = s, best_d = d, best_size = size;
  }
  return best;
}

std::optional<double> loo_regret(const ByShape& shapes, const std::vector<int64_t>& donor,
                                 std::vector<int64_t>* neighbour_out) {
  auto nb = nearest(shapes, donor, &donor);
  if (!nb) return std::nullopt;
  if (neighbour_out) *neighbour_out = *nb;
  const Measured* own = best_of(shapes.at(donor));
  const Measured* theirs = best_of(shapes.at(*nb));
  std::optional<double> t;
  for (const auto& m : shapes.at(donor))
    if (m.point == theirs->point && (!t || m.median < *t)) t = m.median;
  if (!t || own->median <= 0) return std::nullopt;
  return *t / own->median - 1.0;
}

}  // namespace

std::string quick_check(sqlite3* db) {
  try {
    Stmt q(db, "PRAGMA quick_check");
    std::string out;
    while (q.step()) out += (out.empty() ? "" : "; ") + q.text(0);
    return out;
  } catch (const Error& e) {
    return e.what();
  }
}

double shape_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    d += std::fabs(std::log2(double(std::max<int64_t>(1, a[i]))) - std::log2(double(std::max<int64_t>(1, b[i]))));
  return d;
}

std::optional<Winner> lookup_winner(sqlite3* db_, const DeviceFingerprint& dev, const std::string& family,
                                    const std::string& dtypes, const std::vector<int64_t>& shape,
                                    const std::string& hash, int64_t* skipped) {
  ByShape shapes = measured_by_shape(db_, dev, family, dtypes, hash, skipped);
  Winner w;
  std::vector<int64_t> donor = shape;
  if (!shapes.count(shape)) {
    auto nb = nearest(shapes, shape, nullptr);
    if (!nb) return std::nullopt;
    donor = *nb;
    w.exact = false;
    w.distance = shape_distance(shape, donor);
    w.fallback_regret = loo_regret(shapes, donor, nullptr);
  }
  const Measured* b = best_of(shapes.at(donor));
  w.point = nlohmann::json::parse(b->point);
  w.median_s = b->median;
  w.shape = donor;
  return w;
}

std::vector<ShapeRegret> shape_regrets(sqlite3* db_, const DeviceFingerprint& dev, const std::string& family,
                                       const std::string& dtypes, const std::string& hash) {
  ByShape shapes = measured_by_shape(db_, dev, family, dtypes, hash, nullptr);
  std::vector<ShapeRegret> out;
  for (const auto& [s, rows] : shapes) {
    ShapeRegret r;
    r.shape = s;
    r.regret = loo_regret(shapes, s, &r.neighbour);
    out.push_back(r);
  }
  return out;
}

std::vector<StaleRows> stale_rows(sqlite3* db, const std::string& family, const std::string& source_hash) {
  Stmt q(db,
         "SELECT k.source_hash, d.name, COUNT(*) FROM result r JOIN kernel k ON r.kernel_id=k.id "
         "JOIN device d ON r.device_id=d.id WHERE k.family=? AND k.source_hash<>? "
         "GROUP BY k.source_hash, d.name ORDER BY k.source_hash, d.name");
  q.bind(1, family).bind(2, source_hash);
  std::vector<StaleRows> out;
  while (q.step()) out.push_back({q.text(0), q.text(1), q.i64(2)});
  return out;
}

WinnersTable::WinnersTable(const std::string& path) : path_(path) {
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": no such tuning store", kExitBadInput);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(path + ": cannot open the tuning store: " + msg, kExitBadInput);
  }
  sqlite3_busy_timeout(db_, 10000);
  try {
    // Preparing names every table the lookups read; LIMIT 0 keeps opening independent of the store's size.
    Stmt q(db_, "SELECT 1 FROM result r JOIN kernel k ON r.kernel_id=k.id JOIN device d ON r.device_id=d.id LIMIT 0");
    q.step();
  } catch (const Error&) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(path + ": not a qtune tuning store (no result, kernel and device tables)", kExitBadInput);
  }
  std::string qc = quick_check(db_);
  if (qc != "ok") warn_once("SQLite reports it damaged (" + qc + ")");
}

void WinnersTable::warn_once(const std::string& why) const {
  if (warned_) return;
  warned_ = true;
  std::fprintf(stderr, "warning: tuning store %s: %s; rows that cannot be read are ignored (qtune store check lists them)\n",
               path_.c_str(), why.c_str());
}

WinnersTable::~WinnersTable() { sqlite3_close(db_); }

std::optional<Winner> WinnersTable::lookup(const DeviceFingerprint& dev, const std::string& family,
                                           const std::string& dtypes, const std::vector<int64_t>& shape,
                                           const std::string& source_hash) const {
  int64_t skipped = 0;
  auto w = lookup_winner(db_, dev, family, dtypes, shape, source_hash, &skipped);
  if (skipped > 0) warn_once(std::to_string(skipped) + " result rows cannot be read");
  return w;
}

std::vector<StaleRows> WinnersTable::stale(const std::string& family, const std::string& source_hash) const {
  return stale_rows(db_, family, source_hash);
}

std::optional<DispatchEntry> WinnersTable::dispatch(const DeviceFingerprint& dev, const std::string& op,
                                                    const std::string& weight_type, const std::vector<int64_t>& rest,
                                                    int64_t m) const {
  const std::vector<DispatchEntry> entries = read_dispatch(db_, dev, op, weight_type, rest);
  if (entries.empty()) return std::nullopt;
  std::vector<int64_t> buckets;
  for (const DispatchEntry& e : entries) buckets.push_back(e.bucket);
  const int64_t b = bucket_for(buckets, m);
  for (const DispatchEntry& e : entries)
    if (e.bucket == b) return e;
  return std::nullopt;
}

}  // namespace qt::winners
