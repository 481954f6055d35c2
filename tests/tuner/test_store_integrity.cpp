// A damaged store never hides damage: rows that do not parse are named by key and skipped, a store SQLite
// reports malformed gets one warning and is not written to unless forced.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "common/error.h"
#include "device/winners/winners.h"
#include "tuner/store/store.h"
#include "tests/tuner/scratch_path.h"
#include "common/paths.h"

using namespace qt::tune;

namespace {

std::string fresh_db(const std::string& name) { return qt::test::tuner_scratch(name, ".sqlite"); }

ResultRow row(int64_t n, int bx, double median_s) {
  ResultRow r;
  r.device.name = "cpu-test";
  r.family = "cpu.q8_0_matvec";
  r.source_hash = "h1";
  r.shape = {1, n, n};
  r.dtypes = "q8_0xf32->f32";
  r.point = {{"rows_per_task", bx}};
  r.stats = summarize({median_s, median_s * 1.01, median_s * 0.99});
  r.run_id = "test";
  r.detail = std::string(200, 'x');  // rows spread over several pages, so one page can be damaged
  return r;
}

void sql(const std::string& path, const std::string& statement) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

struct Run {
  int status;
  std::string out;
};

Run run(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string qtune() { return qt::binary_root() + "/bin/qtune"; }

// A store with 40 rows whose rows 7 and 23 hold JSON that does not parse.
std::string store_with_bad_rows(const std::string& name) {
  std::string p = fresh_db(name);
  {
    Store st(p);
    std::vector<ResultRow> rows;
    for (int i = 0; i < 40; ++i) rows.push_back(row(64 + i, 1 + i % 4, 1e-3 * (1 + i)));
    REQUIRE(st.put_many(rows) == 40);
  }
  sql(p, "UPDATE result SET point='{\"rows_per_task\": ' WHERE id=7");
  sql(p, "UPDATE result SET shape='[1, \"x\"]', samples='[NaN' WHERE id=23");
  return p;
}

// Overwrites the header of the store's last page, so SQLite's quick check reports the file malformed.
void damage_last_page(const std::string& path) {
  auto size = std::filesystem::file_size(path);
  REQUIRE(size >= 8 * 4096);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size - 4096));
  const char junk[16] = {0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F};
  f.write(junk, sizeof junk);
}

}  // namespace

TEST_CASE("rows whose JSON does not parse are listed by id and key, and the others are still read",
          "[tuner][store]") {
  std::string p = store_with_bad_rows("bad-rows");
  Store st(p);
  std::vector<BadRow> bad;
  auto good = st.rows("", &bad);
  REQUIRE(good.size() == 38);
  REQUIRE(bad.size() == 2);
  CHECK(bad[0].id == 7);
  CHECK(bad[1].id == 23);
  CHECK_THAT(bad[0].key, Catch::Contains("cpu.q8_0_matvec") && Catch::Contains("[1,70,70]"));
  CHECK_THAT(bad[1].problem, Catch::Contains("shape"));
  std::vector<BadRow> bad_export;
  REQUIRE(st.export_json("", &bad_export)["results"].size() == 38);
  REQUIRE(bad_export.size() == 2);
}

TEST_CASE("qtune store check names each bad row and fails, store export writes the good rows and reports the bad",
          "[tuner][store]") {
  std::string p = store_with_bad_rows("bad-rows-cli");
  Run check = run(qtune() + " store check --cache " + p);
  INFO(check.out);
  REQUIRE(check.status == 1);
  REQUIRE_THAT(check.out, Catch::Contains("2 bad") && Catch::Contains("result id 7 ") && Catch::Contains("result id 23 "));
  std::string out = p + ".json";
  Run exp = run(qtune() + " store export --cache " + p + " --out " + out);
  INFO(exp.out);
  REQUIRE(exp.status == 1);
  REQUIRE_THAT(exp.out, Catch::Contains("bad row") && Catch::Contains("result id 23"));
  std::ifstream f(out);
  auto j = nlohmann::json::parse(f);
  REQUIRE(j["results"].size() == 38);
}

TEST_CASE("winner lookups skip unreadable rows and the runtime's table warns once naming the store",
          "[tuner][store]") {
  std::string p = fresh_db("bad-winner");
  {
    Store st(p);
    st.put(row(64, 1, 2e-3));
    st.put(row(64, 2, 1e-3));  // the fastest, then damaged below
  }
  sql(p, "UPDATE result SET point='{not json' WHERE id=2");
  // stderr into a file for the two lookups: the warning must appear once, naming the store.
  const std::string err_path = p + ".stderr";
  std::fflush(stderr);
  const int saved = ::dup(2);
  FILE* err = std::fopen(err_path.c_str(), "w");
  REQUIRE(err != nullptr);
  ::dup2(::fileno(err), 2);
  std::optional<qt::winners::Winner> w, again;
  {
    qt::winners::WinnersTable table(p);
    w = table.lookup(row(64, 1, 0).device, "cpu.q8_0_matvec", "q8_0xf32->f32", {1, 64, 64}, "h1");
    again = table.lookup(row(64, 1, 0).device, "cpu.q8_0_matvec", "q8_0xf32->f32", {1, 64, 64}, "h1");
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(err);
  std::ifstream in(err_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(w.has_value());
  REQUIRE(w->point["rows_per_task"] == 1);
  REQUIRE(again.has_value());
  size_t warnings = 0;
  for (size_t at = text.find("warning: tuning store " + p); at != std::string::npos; at = text.find("warning:", at + 1))
    ++warnings;
  REQUIRE(warnings == 1);
}

TEST_CASE("a store SQLite reports malformed gets a warning and is written only with force_write", "[tuner][store]") {
  std::string p = fresh_db("malformed");
  {
    Store st(p);
    std::vector<ResultRow> rows;
    for (int i = 0; i < 200; ++i) rows.push_back(row(64 + i, 1, 1e-3));
    st.put_many(rows);
  }
  damage_last_page(p);
  Store st(p);
  REQUIRE(st.quick_check() != "ok");
  REQUIRE_THROWS_WITH(st.put(row(8, 1, 1e-3)), Catch::Contains(p) && Catch::Contains("malformed") &&
                                                   Catch::Contains("--force-write"));
  StoreOptions force;
  force.force_write = true;
  Store forced(p, force);
  // Forced, the write is attempted: it lands, or SQLite itself reports the damage; never the refusal.
  try {
    forced.put(row(8, 1, 1e-3));
  } catch (const qt::Error& e) {
    REQUIRE_THAT(e.what(), !Catch::Contains("refusing"));
  }
  Run check = run(qtune() + " store check --cache " + p);
  REQUIRE(check.status == 1);
  Run tune = run(qtune() + " --device cpu --family q8_0_matvec --shape 1,64,64 --budget 1 --quiet --cache " + p);
  INFO(tune.out);
  REQUIRE(tune.status != 0);
  REQUIRE_THAT(tune.out, Catch::Contains("warning: " + p) && Catch::Contains("refusing to write"));
}

TEST_CASE("damaged dispatch rows of every kind are left out with one warning line, qrun still decodes, and store "
          "check names each of them",
          "[tuner][store]") {
  const std::string p = fresh_db("bad-dispatch");
  const std::string model = qt::source_root() + "/tests/golden/files/dense.ak48";
  // A real store for the emulator: a tune of the golden model, with its batch dispatch.
  const Run tuned = run(qtune() + " --device emu --gpu sm80 --model " + model + " --buckets 1 --budget 1 --quiet "
                        "--families awq_frag_gemv,f16_gemv --cache " + p);
  INFO(tuned.out);
  REQUIRE(tuned.status == 0);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(p.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM dispatch", -1, &q, nullptr);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  const int rows = sqlite3_column_int(q, 0);
  sqlite3_finalize(q);
  sqlite3_close(db);
  REQUIRE(rows >= 4);
  // Every kind of damage a dispatch row can carry, one row each.
  sql(p, "UPDATE dispatch SET ranking='[{\"family\": \"emu.awq_frag_gemv\", \"median_s\": \"fast\"}]' WHERE rowid=1");
  sql(p, "UPDATE dispatch SET ranking='[{\"family\":' WHERE rowid=2");
  sql(p, "UPDATE dispatch SET ranking='[]' WHERE rowid=3");
  sql(p, "UPDATE dispatch SET ranking=X'00FF8081' WHERE rowid=4");
  sql(p, "INSERT INTO dispatch VALUES((SELECT device FROM dispatch LIMIT 1), 'linear.frag', 'AWQ_INT4', '[\"x\"]', 1, "
         "'[{\"family\": \"emu.awq_frag_gemv\", \"median_s\": 1e-5}]', 'r')");
  sql(p, "INSERT INTO dispatch VALUES('{\"nam\": 1}', 'linear', 'F16', '[64,64,64]', 1, "
         "'[{\"family\": \"emu.f16_gemv\", \"median_s\": 1e-5}]', 'r')");
  sql(p, "INSERT INTO dispatch VALUES((SELECT device FROM dispatch LIMIT 1), 'linear', 'F16', '[7,7,7]', 1, "
         "'[{\"family\": \"emu.no_such_family\", \"median_s\": 1e-5}]', 'r')");

  const Run check = run(qtune() + " store check --cache " + p);
  INFO(check.out);
  CHECK(check.status == 1);
  CHECK(check.out.find("not a time in seconds") != std::string::npos);
  CHECK(check.out.find("ranking is not valid JSON") != std::string::npos);
  CHECK(check.out.find("ranking is empty") != std::string::npos);
  CHECK(check.out.find("shape holds \"x\", not a size") != std::string::npos);
  CHECK(check.out.find("needs at least a 'name'") != std::string::npos);
  CHECK(check.out.find("'emu.no_such_family', a family this build does not have") != std::string::npos);
  size_t bad_lines = 0;
  for (size_t at = 0; (at = check.out.find("bad row: dispatch", at)) != std::string::npos; ++at) ++bad_lines;
  CHECK(bad_lines == 7);

  const Run decode = run(qt::binary_root() + "/bin/qrun --device emu --model " + model + " --tuned-cache " + p +
                         " --prompt-ids 1,2,3 -n 2 --temp 0");
  INFO(decode.out);
  CHECK(decode.status == 0);
  size_t warnings = 0;
  for (size_t at = 0; (at = decode.out.find("warning: tuning store", at)) != std::string::npos; ++at) ++warnings;
  CHECK(warnings == 1);
  CHECK(decode.out.find("6 rows cannot be read") != std::string::npos);
  CHECK(decode.out.find("json.exception") == std::string::npos);
}

TEST_CASE("a store tuned only for another device is named as such by qrun in one line", "[tuner][store]") {
  const std::string p = fresh_db("other-device");
  const std::string model = qt::source_root() + "/tests/golden/files/dense.ak48";
  const Run tuned = run(qtune() + " --device emu --gpu sm86 --model " + model +
                        " --buckets 1 --budget 1 --quiet --families f16_gemv --cache " + p);
  INFO(tuned.out);
  REQUIRE(tuned.status == 0);
  const Run decode = run(qt::binary_root() + "/bin/qrun --device emu --model " + model + " --tuned-cache " + p +
                         " --prompt-ids 1,2 -n 1 --temp 0");
  INFO(decode.out);
  CHECK(decode.status == 0);
  CHECK(decode.out.find("no results for this device, emu (sm_80); it holds emu (sm_86)") != std::string::npos);
}

TEST_CASE("a stored point that is not one of its family's is named by store check, and qrun skips it saying so",
          "[tuner][store]") {
  const std::string p = fresh_db("bad-point");
  const std::string model = qt::source_root() + "/tests/golden/files/dense.ajc1";
  Run tune = run(qtune() + " --device cpu --model " + model + " --cache " + p + " --budget 2 --min-time 0 --min-reps 1 --quiet");
  INFO(tune.out);
  REQUIRE(tune.status == 0);
  // Every row's point edited by hand into one of the right names but a value of the wrong type (each its own, as
  // the store keeps no two identical rows).
  sql(p, "UPDATE result SET point='{\"isa\":\"avx2\",\"rows_per_task\":\"r' || id || '\",\"threads\":1}'");
  Run check = run(qtune() + " store check --cache " + p);
  INFO(check.out);
  CHECK(check.status == 1);
  CHECK_THAT(check.out, Catch::Contains("point {\"isa\":\"avx2\",\"rows_per_task\":\"r") &&
                            Catch::Contains("is not a point of this build's matvec.q8_0; qrun skips it"));
  Run qrun = run(qt::binary_root() + "/bin/qrun --model " + model + " --prompt-ids 1,2 -n 1 --tuned-cache " + p);
  INFO(qrun.out);
  CHECK(qrun.status == 0);  // no raw JSON exception: the run goes on on the built-in choices
  CHECK_THAT(qrun.out, Catch::Contains("skipped 4 winners whose stored point is not one of this build's"));
  CHECK_THAT(qrun.out, Catch::Contains("using the built-in choices"));
}

TEST_CASE("qtune store's reading commands refuse a path that holds no store and create none", "[tuner][store]") {
  const std::string missing = fresh_db("no-such-store");
  std::remove(missing.c_str());
  for (const char* sub : {"check", "export", "lookup --family cpu.matvec.q8_0 --shape 96,96,32"}) {
    INFO(sub);
    Run r = run(qtune() + " store " + sub + " --cache " + missing);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains(missing + ": no such store"));
    CHECK_FALSE(std::filesystem::exists(missing));
  }
  const std::string empty = fresh_db("empty-store");
  std::ofstream{empty};
  Run r = run(qtune() + " store check --cache " + empty);
  CHECK(r.status == 2);
  CHECK_THAT(r.out, Catch::Contains("an empty file, not a qtune store"));
  CHECK(std::filesystem::file_size(empty) == 0);
  // import makes a store where there was none.
  Run exp = run(qtune() + " store import /nonexistent.json --cache " + missing);
  CHECK(exp.status != 0);
}
