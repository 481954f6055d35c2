// Fuzz entry for the store's rows, read back by the tuner's store and by the runtime's winner lookup.
#include <sqlite3.h>

#include <algorithm>

#include "device/winners/winners.h"
#include "tests/fuzz/fuzz_support.h"
#include "tuner/store/store.h"

namespace qt::fuzz {

using namespace detail;

void store_row(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    std::string p = scratch_path("store.sqlite");
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(p + s);
    tune::Store st(p);
    tune::ResultRow r;
    r.device.name = "fuzz";
    r.family = "f";
    r.shape = {1, 64, 64};
    r.point = {{"x", 1}};
    r.stats = qt::summarize({1e-3, 1.1e-3});
    r.run_id = "seed";
    st.put(r);
    return p;
  }();
  std::string_view in = text_of(data, size);
  std::string cols[3];
  for (int c = 0, start = 0; c < 3; ++c) {
    size_t end = in.find('\0', static_cast<size_t>(start));
    if (end == std::string_view::npos) end = in.size();
    if (static_cast<size_t>(start) <= in.size()) cols[c] = std::string(in.substr(static_cast<size_t>(start), end - start));
    start = static_cast<int>(std::min(end + 1, in.size() + 1));
  }
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "UPDATE result SET shape=?, point=?, samples=? WHERE id=1", -1, &st, nullptr);
  for (int c = 0; c < 3; ++c) sqlite3_bind_text(st, c + 1, cols[c].data(), int(cols[c].size()), SQLITE_TRANSIENT);
  sqlite3_step(st);
  sqlite3_finalize(st);
  sqlite3_close(db);
  expect_clean("store_row", [&] {
    tune::StoreOptions o;
    o.warn_if_damaged = false;
    tune::Store store(path, o);
    std::vector<tune::BadRow> bad;
    (void)store.export_json("", &bad).dump();
    winners::DeviceFingerprint dev;
    dev.name = "fuzz";
    winners::WinnersTable table(path);
    (void)table.lookup(dev, "f", "", {1, 64, 64}, "");
  });
}

}  // namespace qt::fuzz
