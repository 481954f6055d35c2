#include "device/winners/dispatch.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "device/winners/sqlite_stmt.h"

namespace qt::winners {

namespace {

bool has_dispatch_table(sqlite3* db) {
  Stmt q(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='dispatch'");
  return q.step();
}

}  // namespace

std::vector<int64_t> default_batch_buckets() {
  std::vector<int64_t> b;
  for (int64_t m = 1; m <= 4096; m *= 2) b.push_back(m);
  return b;
}

std::vector<Crossover> crossovers(std::vector<DispatchEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.bucket < b.bucket; });
  std::vector<Crossover> out;
  std::string leader;
  for (const DispatchEntry& e : entries) {
    if (e.ranking.empty()) continue;
    const std::string& top = e.ranking.front().family;
    if (!leader.empty() && top != leader) out.push_back({e.bucket, leader, top});
    leader = top;
  }
  return out;
}

int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t m) {
  if (buckets.empty()) throw Error("no batch bucket to choose from", kExitFailure);
  int64_t best = -1, largest = buckets.front();
  for (int64_t b : buckets) {
    largest = std::max(largest, b);
    if (b >= m && (best < 0 || b < best)) best = b;
  }
  return best < 0 ? largest : best;
}

void create_dispatch_schema(sqlite3* db) {
  Stmt(db,
       "CREATE TABLE IF NOT EXISTS dispatch(device TEXT NOT NULL, op TEXT NOT NULL, weight_type TEXT NOT NULL, "
       "shape TEXT NOT NULL, bucket INTEGER NOT NULL, ranking TEXT NOT NULL, run_id TEXT, "
       "PRIMARY KEY(device, op, weight_type, shape, bucket))")
      .step();
}

void put_dispatch(sqlite3* db, const DeviceFingerprint& dev, const std::string& op, const std::string& weight_type,
                  const std::vector<int64_t>& rest, const std::vector<DispatchEntry>& entries, const std::string& run_id) {
  const std::string shape = nlohmann::json(rest).dump();
  Stmt(db, "BEGIN IMMEDIATE").step();
  try {
    Stmt del(db, "DELETE FROM dispatch WHERE device=? AND op=? AND weight_type=? AND shape=?");
    del.bind(1, dev.key()).bind(2, op).bind(3, weight_type).bind(4, shape).step();
    Stmt ins(db, "INSERT INTO dispatch(device, op, weight_type, shape, bucket, ranking, run_id) VALUES(?,?,?,?,?,?,?)");
    for (const DispatchEntry& e : entries) {
      nlohmann::json ranking = nlohmann::json::array();
      for (const Ranked& r : e.ranking) ranking.push_back({{"family", r.family}, {"median_s", r.median_s}});
      ins.reset();
      ins.bind(1, dev.key()).bind(2, op).bind(3, weight_type).bind(4, shape).bind(5, e.bucket);
      ins.bind(6, ranking.dump()).bind(7, run_id).step();
    }
    Stmt(db, "COMMIT").step();
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<DispatchEntry> read_dispatch(sqlite3* db, const DeviceFingerprint& dev, const std::string& op,
                                         const std::string& weight_type, const std::vector<int64_t>& rest) {
  std::vector<DispatchEntry> out;
  if (!has_dispatch_table(db)) return out;
  Stmt q(db, "SELECT bucket, ranking FROM dispatch WHERE device=? AND op=? AND weight_type=? AND shape=? ORDER BY bucket");
  q.bind(1, dev.key()).bind(2, op).bind(3, weight_type).bind(4, nlohmann::json(rest).dump());
  while (q.step()) {
    // A damaged row is left out: the runtime then falls back to the per-family winners.
    const nlohmann::json ranking = nlohmann::json::parse(q.text(1), nullptr, false);
    if (!ranking.is_array()) continue;
    DispatchEntry e;
    e.bucket = q.i64(0);
    for (const auto& r : ranking)
      if (r.is_object() && r.contains("family") && r["family"].is_string())
        e.ranking.push_back({r["family"].get<std::string>(), r.value("median_s", 0.0)});
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace qt::winners
