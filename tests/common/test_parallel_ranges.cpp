// parallel_ranges (common/parallel_ranges.h): every index is run exactly once, and a range that throws reaches
// the caller as an exception instead of terminating the program from a worker thread.
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "common/parallel_ranges.h"

TEST_CASE("parallel_ranges runs every index once and rethrows a range's exception on the calling thread") {
  std::vector<std::atomic<int>> hits(1000);
  qt::parallel_ranges(1000, 1e9, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[size_t(i)];
  }, 0);
  for (const auto& h : hits) CHECK(h == 1);
  // The last range throws: on a one-core machine that is the calling thread, on others a worker.
  CHECK_THROWS_WITH(qt::parallel_ranges(1000, 1e9, [&](int64_t, int64_t e) {
    if (e == 1000) throw std::runtime_error("disk full");
  }, 0), "disk full");
}
