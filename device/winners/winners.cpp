#include "device/winners/winners.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "common/error.h"
#include "common/paths.h"
#include "device/winners/sqlite_stmt.h"

namespace qt::winners {

namespace {

// Verified rows of one (devices, family, dtypes[, hash]) as shape -> (point text, median).
struct Measured {
  std::string point;
  double median;
};
using ByShape = std::map<std::vector<int64_t>, std::vector<Measured>>;

ByShape measured_by_shape(sqlite3* db, const std::vector<int64_t>& device_ids, const std::string& family,
                          const std::string& dtypes, const std::string& hash, std::vector<BadRow>* bad) {
  ByShape out;
  if (device_ids.empty()) return out;
  ResultQuery q;
  q.family = family;
  q.device_ids = device_ids;
  q.dtypes = dtypes;
  q.source_hash = hash;
  q.ok_only = true;
  for (const ResultRow& r : read_results(db, q, bad)) out[r.shape].push_back({r.point.dump(), r.stats.median});
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

// "driver 13.0 (this GPU: 13.1), qtune 0.1.0 (this build: 0.2.0)": the fields where two fingerprints differ.
std::string differences(const DeviceFingerprint& measured, const DeviceFingerprint& live) {
  const nlohmann::json a = measured.to_json(), b = live.to_json();
  std::string out;
  for (const auto& [name, value] : a.items())
    if (!b.contains(name) || b[name] != value)
      out += (out.empty() ? "" : ", ") + name + " " + (value.is_string() ? value.get<std::string>() : value.dump()) +
             " (here " + (b.contains(name) ? (b[name].is_string() ? b[name].get<std::string>() : b[name].dump()) : "unknown") + ")";
  for (const auto& [name, value] : b.items())
    if (!a.contains(name)) out += (out.empty() ? "" : ", ") + name + " not recorded (here " + value.dump() + ")";
  return out;
}

}  // namespace

double shape_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    d += std::fabs(std::log2(double(std::max<int64_t>(1, a[i]))) - std::log2(double(std::max<int64_t>(1, b[i]))));
  return d;
}

DeviceMatch match_device(sqlite3* db, const DeviceFingerprint& live, std::vector<BadRow>* bad) {
  DeviceMatch m;
  const std::vector<StoredDevice> devices = read_devices(db, bad);
  for (const StoredDevice& d : devices) {
    m.held.push_back(d.fingerprint);
    if (d.fingerprint == live) m.device_ids.push_back(d.id);
  }
  if (!m.device_ids.empty()) {
    m.kind = DeviceMatch::Kind::Exact;
    m.measured_on = live;
    return m;
  }
  // The same model under other software: its most recently measured device, so a store tuned under several
  // drivers serves the newest timings.
  std::map<int64_t, std::string> latest;
  Stmt q(db, "SELECT device_id, MAX(created_at) FROM result GROUP BY device_id");
  while (q.step()) latest[q.i64(0)] = q.text(1);
  const StoredDevice* pick = nullptr;
  for (const StoredDevice& d : devices)
    if (d.fingerprint.same_model(live) && latest.count(d.id) && (!pick || latest[d.id] > latest[pick->id])) pick = &d;
  if (!pick) return m;
  m.kind = DeviceMatch::Kind::SameModel;
  m.measured_on = pick->fingerprint;
  for (const StoredDevice& d : devices)
    if (d.fingerprint == pick->fingerprint) m.device_ids.push_back(d.id);
  return m;
}

std::string match_line(const DeviceMatch& m, const DeviceFingerprint& live, const std::string& path) {
  switch (m.kind) {
    case DeviceMatch::Kind::Exact: return "";
    case DeviceMatch::Kind::SameModel:
      return "tuned cache " + path + ": using winners measured on this GPU model (" + live.name + ", " + live.arch +
             ") under other conditions: " + differences(m.measured_on, live);
    case DeviceMatch::Kind::None: break;
  }
  std::string held;
  for (const DeviceFingerprint& d : m.held) {
    const std::string one = d.name + (d.arch.empty() ? "" : " (" + d.arch + ")");
    if (held.find(one) == std::string::npos) held += (held.empty() ? "" : ", ") + one;
  }
  return "tuned cache " + path + ": no results for this device, " + live.name + " (" + live.arch + "); it holds " +
         (held.empty() ? "no device at all" : held) + "; tune this one with qtune";
}

std::optional<Winner> lookup_winner(sqlite3* db, const std::vector<int64_t>& device_ids, const std::string& family,
                                    const std::string& dtypes, const std::vector<int64_t>& shape,
                                    const std::string& hash, std::vector<BadRow>* bad) {
  ByShape shapes = measured_by_shape(db, device_ids, family, dtypes, hash, bad);
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

std::vector<ShapeRegret> shape_regrets(sqlite3* db, const std::vector<int64_t>& device_ids, const std::string& family,
                                       const std::string& dtypes, const std::string& hash) {
  ByShape shapes = measured_by_shape(db, device_ids, family, dtypes, hash, nullptr);
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
  std::map<int64_t, std::string> names;
  for (const StoredDevice& d : read_devices(db)) names[d.id] = d.fingerprint.name;
  Stmt q(db,
         "SELECT k.source_hash, r.device_id, COUNT(*) FROM result r JOIN kernel k ON r.kernel_id=k.id "
         "WHERE k.family=? AND k.source_hash<>? GROUP BY k.source_hash, r.device_id");
  q.bind(1, family).bind(2, source_hash);
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  while (q.step()) {
    const auto name = names.find(q.i64(1));
    counts[{q.text(0), name == names.end() ? "an unreadable device row" : name->second}] += q.i64(2);
  }
  std::vector<StaleRows> out;
  for (const auto& [key, n] : counts) out.push_back({key.first, key.second, n});
  return out;
}

std::optional<DispatchEntry> dispatch_for(sqlite3* db, const DeviceFingerprint& device, const std::string& op,
                                          const std::string& weight_type, const std::vector<int64_t>& rest, int64_t m,
                                          std::vector<BadRow>* bad) {
  DispatchQuery q;
  q.device = device;
  q.op = op;
  q.weight_type = weight_type;
  q.shape = rest;
  const std::vector<DispatchRow> rows = read_dispatch_rows(db, q, bad);
  if (rows.empty()) return std::nullopt;
  std::vector<int64_t> buckets;
  for (const DispatchRow& r : rows) buckets.push_back(r.bucket);
  const int64_t b = bucket_for(buckets, m);
  for (const DispatchRow& r : rows)
    if (r.bucket == b) return DispatchEntry{r.bucket, r.ranking};
  return std::nullopt;
}

namespace {

// A read-only open of `path`; `immutable` reads it as a file nobody writes (SQLite then takes no locks and needs
// no -shm file beside it). Returns the error, "" when the schema is a store's.
std::string open_store(const std::string& path, bool immutable, sqlite3** db) {
  std::string name = path;
  int flags = SQLITE_OPEN_READONLY;
  if (immutable) {
    name = "file:";
    for (char c : path) {
      if (c == '%' || c == '?' || c == '#') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        name += hex;
      } else {
        name += c;
      }
    }
    name += "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  if (sqlite3_open_v2(name.c_str(), db, flags, nullptr) != SQLITE_OK) {
    std::string msg = *db ? sqlite3_errmsg(*db) : "out of memory";
    sqlite3_close(*db);
    *db = nullptr;
    return path + ": cannot open the tuning store: " + msg;
  }
  sqlite3_busy_timeout(*db, 10000);
  try {
    prepare_schema(*db, path, OpenMode::ReadOnly);
  } catch (const Error& e) {
    sqlite3_close(*db);
    *db = nullptr;
    return e.what();
  } catch (const std::exception& e) {
    sqlite3_close(*db);
    *db = nullptr;
    return path + ": not a readable tuning store: " + e.what();
  }
  return "";
}

}  // namespace

sqlite3* open_store_read_only(const std::string& path, bool immutable) {
  if (const std::string why = regular_file_problem(path); !why.empty())
    throw Error(path + ": " + (why == "no such file" ? "no such tuning store" : why), kExitBadInput);
  sqlite3* db = nullptr;
  std::string error = open_store(path, immutable, &db);
  // A WAL store in a folder this user cannot write: reading it needs a -shm file SQLite cannot create there.
  // Nobody can be writing it either (a writer needs that folder too), so it is read as an immutable file.
  if (!error.empty() && error.find("readonly database") != std::string::npos) error = open_store(path, true, &db);
  if (!error.empty()) throw Error(error, kExitBadInput);
  return db;
}

sqlite3* open_store_read_write(const std::string& path) {
  auto refuse = [&](const std::string& why) { throw Error(path + ": cannot write the tuning store: " + why, kExitBadInput); };
  // A folder or a FIFO: SQLite would say "unable to open database file" or "disk I/O error".
  std::string why = file_exists(path) ? "" : regular_file_problem(path);
  if (why == "no such file") why = "";
  if (why.empty()) why = output_file_problem(path);
  if (!why.empty()) refuse(why);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    refuse(why);
  }
  sqlite3_busy_timeout(db, 60000);
  // SQLite opens a write-protected file read-only without saying so.
  if (sqlite3_db_readonly(db, "main") == 1) {
    sqlite3_close(db);
    refuse("the file is read-only");
  }
  try {
    // Before anything is written (WAL mode included): a file that is no store is refused untouched.
    prepare_schema(db, path, OpenMode::ReadWrite);
    // Switching to WAL needs a brief exclusive lock; several tuners starting together retry it.
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if (rc != SQLITE_BUSY || attempt > 200) throw Error(path + ": not a usable SQLite store: " + sqlite3_errmsg(db));
      usleep(10000);
    }
    exec_sql(db, "PRAGMA synchronous=NORMAL");
    exec_sql(db, "PRAGMA foreign_keys=ON");
  } catch (const Error& e) {
    sqlite3_close(db);
    const std::string what = e.what();
    if (what.find("readonly") != std::string::npos) refuse("the file is read-only");
    throw Error(what, kExitBadInput);
  }
  return db;
}

WinnersTable::WinnersTable(const std::string& path) : path_(path) {
  db_ = open_store_read_only(path);
  const std::string qc = quick_check(db_);
  // Every row is read once here, so one warning counts them all; lookups then skip the same rows quietly.
  std::vector<BadRow> bad;
  read_results(db_, {}, &bad);
  read_dispatch_rows(db_, {}, &bad);
  if (qc != "ok" || !bad.empty()) {
    warned_ = true;
    std::string why = qc != "ok" ? "SQLite reports it damaged (" + qc + ")" : "";
    if (!bad.empty())
      why += (why.empty() ? "" : "; ") + std::to_string(bad.size()) + " row" + (bad.size() == 1 ? "" : "s") +
             " cannot be read (first: " + bad.front().text() + ")";
    std::fprintf(stderr, "warning: tuning store %s: %s; they are ignored (qtune store check lists every bad row)\n",
                 path_.c_str(), why.c_str());
  }
}

void WinnersTable::note_bad(const std::vector<BadRow>& bad) const {
  if (bad.empty() || warned_) return;
  warned_ = true;
  std::fprintf(stderr, "warning: tuning store %s: %zu rows cannot be read (first: %s); they are ignored (qtune store "
               "check lists every bad row)\n", path_.c_str(), bad.size(), bad.front().text().c_str());
}

WinnersTable::~WinnersTable() { sqlite3_close(db_); }

const DeviceMatch& WinnersTable::match(const DeviceFingerprint& live) const {
  auto it = matches_.find(live.key());
  if (it == matches_.end()) {
    std::vector<BadRow> bad;
    it = matches_.emplace(live.key(), match_device(db_, live, &bad)).first;
    note_bad(bad);
  }
  return it->second;
}

std::optional<Winner> WinnersTable::lookup(const DeviceFingerprint& live, const std::string& family,
                                           const std::string& dtypes, const std::vector<int64_t>& shape,
                                           const std::string& source_hash) const {
  std::vector<BadRow> bad;
  auto w = lookup_winner(db_, match(live).device_ids, family, dtypes, shape, source_hash, &bad);
  note_bad(bad);
  return w;
}

std::vector<StaleRows> WinnersTable::stale(const std::string& family, const std::string& source_hash) const {
  return stale_rows(db_, family, source_hash);
}

std::optional<DispatchEntry> WinnersTable::dispatch(const DeviceFingerprint& live, const std::string& op,
                                                    const std::string& weight_type, const std::vector<int64_t>& rest,
                                                    int64_t m) const {
  const DeviceMatch& dm = match(live);
  if (dm.kind == DeviceMatch::Kind::None) return std::nullopt;
  std::vector<BadRow> bad;
  auto e = dispatch_for(db_, dm.measured_on, op, weight_type, rest, m, &bad);
  note_bad(bad);
  return e;
}

}  // namespace qt::winners
