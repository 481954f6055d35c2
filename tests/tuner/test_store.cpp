// The SQLite store: concurrent writer processes, a writer killed mid-transaction, winner lookup with the
// nearest-shape rule and its measured regret, JSON export/import, Kernel Tuner cache import.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <sqlite3.h>

#include "common/error.h"
#include "tuner/store/prior.h"
#include "tuner/store/store.h"
#include "tests/tuner/scratch_path.h"
#include "common/paths.h"

using namespace qt::tune;
namespace winners = qt::winners;

namespace {

std::string fresh_db(const std::string& name) { return qt::test::tuner_scratch(name, ".sqlite"); }

DeviceFingerprint gpu() {
  DeviceFingerprint d;
  d.name = "NVIDIA RTX A4000";
  d.arch = "sm_86";
  d.sm_count = 48;
  d.memory_bytes = 16ull << 30;
  d.clock_mhz = 1560;
  d.driver = "550.54";
  d.cuda_version = "13.0";
  d.nvrtc_version = "13.0";
  d.qtune_version = "0.1.0";
  return d;
}

ResultRow row(std::vector<int64_t> shape, int bx, double median_s, Status st = Status::Ok) {
  ResultRow r;
  r.device = gpu();
  r.family = "awq.gemv";
  r.source_hash = "abc123";
  r.shape = std::move(shape);
  r.dtypes = "awq_int4xf16->f16";
  r.point = {{"block_x", bx}, {"unroll", 2}};
  r.status = st;
  if (has_time(st)) r.stats = summarize({median_s * 0.99, median_s, median_s * 1.02});
  r.run_id = "test";
  return r;
}

}  // namespace

TEST_CASE("several processes writing to one store at once lose no row", "[tuner][store]") {
  std::string path = fresh_db("concurrent");
  { Store init(path); }
  const int writers = 4, per = 40;
  std::vector<pid_t> kids;
  for (int w = 0; w < writers; ++w) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        Store st(path);
        for (int i = 0; i < per; ++i) st.put(row({w + 1, i + 1}, i, 1e-3 * (i + 1)));
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  Store st(path);
  REQUIRE(st.count() == writers * per);
  REQUIRE(st.integrity_check() == "ok");
}

TEST_CASE("a writer killed with SIGKILL in the middle of a transaction leaves a consistent store", "[tuner][store]") {
  std::string path = fresh_db("kill9");
  int sync[2];
  REQUIRE(pipe(sync) == 0);
  const int big = 60000;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(sync[0]);
    Store st(path);
    st.put(row({1, 1}, 1, 1e-3));  // committed before the kill
    std::vector<ResultRow> many;
    for (int i = 0; i < big; ++i) many.push_back(row({2, i + 1}, i, 1e-3));
    char go = 'g';
    (void)!write(sync[1], &go, 1);
    st.put_many(many);  // one long transaction, killed partway
    _exit(0);
  }
  close(sync[1]);
  char go = 0;
  REQUIRE(read(sync[0], &go, 1) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));  // well inside the ~1 s transaction
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(sync[0]);
  REQUIRE(WIFSIGNALED(status));  // it really was killed, not finished

  Store st(path);
  REQUIRE(st.integrity_check() == "ok");
  REQUIRE(st.count() == 1);  // the committed row, none of the interrupted transaction
  st.put(row({3, 3}, 3, 1e-3));  // and the store takes new writes
  REQUIRE(st.count() == 2);
}

TEST_CASE("winner lookup: exact shape, nearest-shape fallback and its measured regret", "[tuner][store]") {
  Store st(fresh_db("lookup"));
  // Shape 1024x1024: best bx=64. Shape 4096x4096: best bx=128; bx=64 measured there too (10% slower).
  st.put_many({row({1024, 1024}, 64, 1.0e-5), row({1024, 1024}, 128, 1.3e-5), row({1024, 1024}, 32, 0, Status::Crashed),
               row({4096, 4096}, 128, 1.0e-4), row({4096, 4096}, 64, 1.1e-4),
               row({4096, 4096}, 256, 0.5e-4, Status::WrongResult)});
  auto exact = st.lookup(gpu(), "awq.gemv", "awq_int4xf16->f16", {4096, 4096});
  REQUIRE(exact);
  REQUIRE(exact->exact);
  REQUIRE(exact->point.at("block_x") == 128);  // the faster wrong result is never a winner
  REQUIRE(exact->median_s == Approx(1.0e-4));

  // 3000x3000 is nearer (in log2) to 4096x4096; donor 4096's own nearest neighbour is 1024, whose winner
  // (bx=64) measured at 4096 is 10% slower: that is the fallback's measured regret.
  auto fb = st.lookup(gpu(), "awq.gemv", "awq_int4xf16->f16", {3000, 3000});
  REQUIRE(fb);
  REQUIRE_FALSE(fb->exact);
  REQUIRE(fb->shape == std::vector<int64_t>{4096, 4096});
  REQUIRE(fb->point.at("block_x") == 128);
  REQUIRE(fb->fallback_regret);
  REQUIRE(*fb->fallback_regret == Approx(0.1));
  // Nearer to 1024: donor 1024, whose neighbour's winner (bx=128) was measured there: 30% regret.
  auto fb2 = st.lookup(gpu(), "awq.gemv", "awq_int4xf16->f16", {1500, 900});
  REQUIRE(fb2->shape == std::vector<int64_t>{1024, 1024});
  REQUIRE(*fb2->fallback_regret == Approx(0.3));
  // Equidistant in log2 (2048 between 1024 and 4096): the larger shape wins the tie.
  REQUIRE(st.lookup(gpu(), "awq.gemv", "awq_int4xf16->f16", {2048, 2048})->shape == std::vector<int64_t>{4096, 4096});

  // Another device, family, dtype or rank finds nothing.
  DeviceFingerprint other = gpu();
  other.driver = "560.1";
  REQUIRE_FALSE(st.lookup(other, "awq.gemv", "awq_int4xf16->f16", {4096, 4096}));
  REQUIRE_FALSE(st.lookup(gpu(), "awq.gemm", "awq_int4xf16->f16", {4096, 4096}));
  REQUIRE_FALSE(st.lookup(gpu(), "awq.gemv", "awq_int4xf16->f16", {4096, 4096, 1}));
  REQUIRE_FALSE(st.lookup(gpu(), "awq.gemv", "awq_int4xf16->f16", {4096, 4096}, "other-hash"));

  auto regrets = st.regrets(gpu(), "awq.gemv", "awq_int4xf16->f16");
  REQUIRE(regrets.size() == 2);
  REQUIRE(*regrets[0].regret == Approx(0.3));
  REQUIRE(*regrets[1].regret == Approx(0.1));
}

TEST_CASE("export to JSON and import into another store round-trips every field and import is idempotent", "[tuner][store]") {
  Store a(fresh_db("export"));
  a.put_many({row({64, 64}, 1, 2e-6), row({64, 64}, 2, 0, Status::Timeout)});
  nlohmann::json j = a.export_json();
  REQUIRE(j["results"].size() == 2);
  Store b(fresh_db("import"));
  REQUIRE(b.import_json(j) == 2);
  REQUIRE(b.import_json(j) == 0);
  auto rows = b.rows();
  REQUIRE(rows.size() == 2);
  REQUIRE(rows[0].device.key() == gpu().key());
  REQUIRE(rows[0].stats.samples.size() == 3);
  REQUIRE(rows[0].stats.median == Approx(2e-6));
  REQUIRE(rows[1].status == Status::Timeout);
  REQUIRE(rows[0].point == nlohmann::json{{"block_x", 1}, {"unroll", 2}});
  REQUIRE_THROWS_WITH(b.import_json(nlohmann::json{{"results", 1}}), Catch::Contains("not a qtune store export"));
}

namespace {

// Every field of every row kind set away from its default, so a field lost on any way shows.
DeviceFingerprint every_field_device() {
  DeviceFingerprint d;
  d.name = "NVIDIA H200";
  d.arch = "sm_90";
  d.sm_count = 132;
  d.memory_bytes = 150109880320ull;
  d.clock_mhz = 1980;
  d.mem_clock_mhz = 3201;
  d.l2_bytes = 62914560;
  d.bus_width_bits = 6016;
  d.driver = "13.0";
  d.cuda_version = "13.0";
  d.nvrtc_version = "13.0";
  d.qtune_version = "0.1.0";
  return d;
}

ResultRow every_field_row() {
  ResultRow r;
  r.device = every_field_device();
  r.family = "cuda.awq_frag_gemv";
  r.source_hash = "dc9015b7";
  r.shape = {1, 4096, 4096, 128};
  r.dtypes = "awq_int4xf16->f16";
  r.point = {{"bk", 64}, {"isa", "avx2"}, {"split", 16}};
  r.status = Status::Ok;
  r.stats = summarize({1.3e-5, 1.2e-5, 1.25e-5});
  r.detail = "detail text";
  r.run_id = "qtune-run-7";
  r.created_at = "2026-11-26T22:18:50.745Z";
  return r;
}

}  // namespace

TEST_CASE("every field of a device, a result and a dispatch entry survives put, rows, export, import, lookup and "
          "dispatch",
          "[tuner][store]") {
  const ResultRow want = every_field_row();
  const winners::DispatchEntry entry{1, {{"cuda.awq_frag_gemv", 1.2e-5}, {"cuda.awq_frag_gemm", 2.5e-5}}};
  const std::vector<int64_t> rest = {4096, 4096, 128};
  auto check_store = [&](const Store& st) {
    const std::vector<ResultRow> rows = st.rows();
    REQUIRE(rows.size() == 1);
    const ResultRow& got = rows[0];
    CHECK(got.device == want.device);
    CHECK(got.device.bus_width_bits == 6016);
    CHECK(got.device.mem_clock_mhz == 3201);
    CHECK(got.family == want.family);
    CHECK(got.source_hash == want.source_hash);
    CHECK(got.shape == want.shape);
    CHECK(got.dtypes == want.dtypes);
    CHECK(got.point == want.point);
    CHECK(got.status == want.status);
    CHECK(got.stats.samples == want.stats.samples);
    CHECK(got.detail == want.detail);
    CHECK(got.run_id == want.run_id);
    CHECK(got.created_at == want.created_at);
    const auto w = st.lookup(want.device, want.family, want.dtypes, want.shape, want.source_hash);
    REQUIRE(w);
    CHECK(w->point == want.point);
    CHECK(w->median_s == Approx(1.25e-5));
    const auto d = st.dispatch(want.device, "linear.frag", "AWQ_INT4", rest);
    REQUIRE(d.size() == 1);
    CHECK(d[0].bucket == 1);
    REQUIRE(d[0].ranking.size() == 2);
    CHECK(d[0].ranking[1].family == "cuda.awq_frag_gemm");
    CHECK(d[0].ranking[1].median_s == 2.5e-5);
    // The runtime's read-only table finds the same winner and ranking for the device that reports it.
    winners::WinnersTable table(st.path());
    CHECK(table.match(want.device).kind == winners::DeviceMatch::Kind::Exact);
    REQUIRE(table.lookup(want.device, want.family, want.dtypes, want.shape, want.source_hash));
    REQUIRE(table.dispatch(want.device, "linear.frag", "AWQ_INT4", rest, 1));
  };
  Store a(fresh_db("every-field-a"));
  a.put(want);
  a.put_dispatch(want.device, "linear.frag", "AWQ_INT4", rest, {entry}, "qtune-run-7");
  check_store(a);
  const nlohmann::json exported = a.export_json();
  CHECK(exported["version"] == 2);
  REQUIRE(exported["dispatch"].size() == 1);
  Store b(fresh_db("every-field-b"));
  REQUIRE(b.import_json(exported) == 1);
  check_store(b);
  REQUIRE(b.import_json(exported) == 0);  // idempotent, dispatch included
  CHECK(b.dispatch_rows().size() == 1);
}

TEST_CASE("winners of the same GPU model measured under another driver or qtune version are used, and said so",
          "[tuner][store]") {
  const std::string path = fresh_db("same-model");
  ResultRow r = every_field_row();
  { Store st(path); st.put(r); }
  winners::WinnersTable table(path);
  DeviceFingerprint live = r.device;
  live.driver = "13.1";
  live.qtune_version = "0.2.0";
  live.clock_mhz = 1755;  // another power limit: still this GPU's timings
  const winners::DeviceMatch& m = table.match(live);
  CHECK(m.kind == winners::DeviceMatch::Kind::SameModel);
  const std::string line = winners::match_line(m, live, path);
  CHECK(line.find("driver 13.0 (here 13.1)") != std::string::npos);
  CHECK(line.find("qtune_version 0.1.0 (here 0.2.0)") != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  REQUIRE(table.lookup(live, r.family, r.dtypes, r.shape, r.source_hash));

  DeviceFingerprint other = r.device;
  other.name = "NVIDIA H100 80GB HBM3";
  other.memory_bytes = 85520809984ull;
  const winners::DeviceMatch& none = table.match(other);
  CHECK(none.kind == winners::DeviceMatch::Kind::None);
  CHECK_FALSE(table.lookup(other, r.family, r.dtypes, r.shape, r.source_hash));
  const std::string why = winners::match_line(none, other, path);
  CHECK(why.find("no results for this device, NVIDIA H100 80GB HBM3 (sm_90)") != std::string::npos);
  CHECK(why.find("it holds NVIDIA H200 (sm_90)") != std::string::npos);
}

TEST_CASE("a store written before schema version 2 is upgraded in place, one of a later version and a foreign "
          "SQLite file are refused in one line",
          "[tuner][store]") {
  // Version 1: the schema of the first GPU run's stores, which had no bus_width_bits column.
  const std::string v1 = fresh_db("schema-v1");
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(v1.c_str(), &db) == SQLITE_OK);
    const std::string fp = every_field_device().key();
    const std::string sql =
        "CREATE TABLE device(id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, name TEXT NOT NULL, arch TEXT, "
        "sm_count INTEGER, memory_bytes INTEGER, clock_mhz INTEGER, mem_clock_mhz INTEGER, l2_bytes INTEGER, driver "
        "TEXT, cuda_version TEXT, nvrtc_version TEXT, qtune_version TEXT);"
        "CREATE TABLE kernel(id INTEGER PRIMARY KEY, family TEXT NOT NULL, source_hash TEXT NOT NULL, "
        "UNIQUE(family, source_hash));"
        "CREATE TABLE result(id INTEGER PRIMARY KEY, device_id INTEGER NOT NULL, kernel_id INTEGER NOT NULL, shape "
        "TEXT NOT NULL, dtypes TEXT NOT NULL, point TEXT NOT NULL, status TEXT NOT NULL, median_s REAL, mad_s REAL, "
        "p20_s REAL, p80_s REAL, ci_low_s REAL, ci_high_s REAL, n_samples INTEGER, samples TEXT, detail TEXT, run_id "
        "TEXT, created_at TEXT NOT NULL);"
        "INSERT INTO device VALUES(1, '" + fp + "', 'NVIDIA H200', 'sm_90', 132, 150109880320, 1980, 3201, 62914560, "
        "'13.0', '13.0', '13.0', '0.1.0');"
        "INSERT INTO kernel VALUES(1, 'cuda.awq_frag_gemv', 'dc9015b7');"
        "INSERT INTO result VALUES(1, 1, 1, '[1,4096,4096,128]', 'awq_int4xf16->f16', '{\"bk\":64}', 'ok', 1.2e-5, 0, "
        "0, 0, 0, 0, 1, '[1.2e-05]', '', 'r', '2026-11-26T22:18:50.745Z');";
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  // The runtime reads it as it is; the full fingerprint (bus width included) comes from the JSON column.
  {
    winners::WinnersTable table(v1);
    CHECK(table.match(every_field_device()).kind == winners::DeviceMatch::Kind::Exact);
  }
  {
    Store st(v1);
    REQUIRE(st.rows().size() == 1);
    CHECK(st.rows()[0].device.bus_width_bits == 6016);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(v1.c_str(), &db) == SQLITE_OK);
  {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "SELECT bus_width_bits FROM device", -1, &q, nullptr);
    REQUIRE(sqlite3_step(q) == SQLITE_ROW);
    CHECK(sqlite3_column_int(q, 0) == 6016);
    sqlite3_finalize(q);
  }
  REQUIRE(sqlite3_exec(db, "PRAGMA user_version = 9", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  CHECK_THROWS_WITH(Store(v1), Catch::Contains("schema version 9, written by a later qtune"));
  CHECK_THROWS_WITH(winners::WinnersTable(v1), Catch::Contains("schema version 9"));

  const std::string foreign = fresh_db("foreign");
  REQUIRE(sqlite3_open(foreign.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "CREATE TABLE notes(t TEXT); INSERT INTO notes VALUES('mine')", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  sqlite3_close(db);
  try {
    Store st(foreign);
    FAIL("a foreign SQLite file was taken as a store");
  } catch (const qt::Error& e) {
    CHECK(e.exit_code() == qt::kExitBadInput);
    CHECK(std::string(e.what()).find("not a qtune tuning store (it holds the tables notes)") != std::string::npos);
  }
  // Refused untouched: no table of ours was added.
  REQUIRE(sqlite3_open(foreign.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table'", -1, &q, nullptr);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  CHECK(sqlite3_column_int(q, 0) == 1);
  sqlite3_finalize(q);
  sqlite3_close(db);
}

TEST_CASE("a Kernel Tuner cache imports with statuses, samples in seconds and a winner", "[tuner][store]") {
  Store st(fresh_db("kt"));
  std::string slice = qt::source_root() + "/tests/tuner/data/convolution_A4000_slice.json.gz";
  REQUIRE(st.import_kt_cache(slice) == 400);
  auto rows = st.rows();
  size_t failed = 0;
  for (const auto& r : rows) failed += r.status == Status::ResourceFailed;
  REQUIRE(failed == 4);
  DeviceFingerprint dev;
  dev.name = "NVIDIA RTX A4000";
  auto w = st.lookup(dev, "convolution_kernel", "", {4096, 4096});
  REQUIRE(w);
  REQUIRE(w->exact);
  double fastest = 1e9;  // the winner is the lowest median of the raw samples, in seconds
  for (const auto& r : rows)
    if (r.status == Status::Ok) fastest = std::min(fastest, r.stats.median);
  REQUIRE(w->median_s == fastest);
  REQUIRE(w->median_s > 1.0e-3);  // recorded times are ~1.7 ms: ms were converted to s
  REQUIRE(w->median_s < 2.5e-3);
}

TEST_CASE("a writer killed while it holds an open write transaction leaves the committed rows and nothing else",
          "[tuner][store]") {
  std::string path = fresh_db("kill9-open");
  int sync[2];
  REQUIRE(pipe(sync) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(sync[0]);
    {
      Store st(path);
      st.put(row({1, 1}, 1, 1e-3));
    }
    // The same writes the store makes, but held open: copies of the committed row, then wait to be killed.
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    for (int i = 0; i < 2000; ++i) {
      std::string sql = "INSERT INTO result(device_id,kernel_id,shape,dtypes,point,status,created_at,run_id) "
                        "SELECT device_id,kernel_id,'[9," + std::to_string(i) + "]',dtypes,point,status,created_at,run_id "
                        "FROM result WHERE id=1";
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    }
    char go = 'g';
    (void)!write(sync[1], &go, 1);
    pause();
    _exit(0);
  }
  close(sync[1]);
  char go = 0;
  REQUIRE(read(sync[0], &go, 1) == 1);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(sync[0]);
  REQUIRE(WIFSIGNALED(status));
  Store st(path);  // the next writer recovers the WAL and the lock
  REQUIRE(st.integrity_check() == "ok");
  REQUIRE(st.count() == 1);
  st.put(row({3, 3}, 3, 1e-3));
  REQUIRE(st.count() == 2);
}

TEST_CASE("the store's results of the family on another GPU become the prior of a search on this one",
          "[tuner][store][transfer]") {
  Store s(fresh_db("prior"));
  s.put(row({1, 4096, 4096}, 64, 2e-5));
  s.put(row({1, 4096, 4096}, 128, 1e-5));
  s.put(row({1, 4096, 4096}, 256, 0, Status::ResourceFailed));
  s.put(row({1, 8192, 8192}, 32, 1e-6));  // another shape: farther from the one asked for
  ResultRow mine = row({1, 4096, 4096}, 32, 5e-7);
  DeviceFingerprint self = gpu();
  self.name = "NVIDIA A100-PCIE-40GB";
  mine.device = self;
  s.put(mine);  // this device's own rows are not a prior
  ResultRow stale = row({1, 4096, 4096}, 32, 1e-9);
  stale.source_hash = "old";
  s.put(stale);  // another kernel source: not the same kernel
  Space space = Space::cartesian({numeric_param("block_x", {32, 64, 128, 256}), numeric_param("unroll", {1, 2})});
  Knowledge k = prior_from_store(s, space, self, "awq.gemv", "abc123", "awq_int4xf16->f16", {1, 4096, 4000});
  REQUIRE(k.prior_source.find("NVIDIA RTX A4000") != std::string::npos);
  auto at = [&](double bx, double unroll) { return k.prior_time[*space.find({uint16_t(std::log2(bx) - 5), uint16_t(unroll - 1)})]; };
  REQUIRE(at(128, 2) == Approx(1e-5));
  REQUIRE(at(64, 2) == Approx(2e-5));
  REQUIRE(std::isnan(at(256, 2)));  // failed there
  REQUIRE(std::isnan(at(32, 2)));   // measured only at a farther shape, on this device, or on another source
  REQUIRE(std::isnan(at(128, 1)));
  REQUIRE(k.prior_order().front() == *space.find({2, 1}));
  // A family no other device has results for: no prior.
  Knowledge none = prior_from_store(s, space, self, "awq.gemm", "abc123", "awq_int4xf16->f16", {1, 4096, 4096});
  REQUIRE_FALSE(none.has_prior());
}
