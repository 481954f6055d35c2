// The seeded generator's bulk byte fill against the draws it stands for.
#include <catch2/catch.hpp>

#include <vector>

#include "common/rng.h"

TEST_CASE("fill_bytes gives the bytes and the state after of n calls of below(256), in one range and on every core",
          "[rng]") {
  // 100 bytes stay on the calling thread; 2^23 + 5 are split over the cores (parallel_ranges), unevenly.
  for (size_t n : {size_t(0), size_t(1), size_t(100), (size_t(1) << 23) + 5}) {
    INFO(n << " bytes");
    qt::Rng one(42), bulk(42);
    std::vector<uint8_t> want(n), got(n, 0xA5);
    for (auto& b : want) b = uint8_t(one.below(256));
    bulk.fill_bytes(got.data(), got.size());
    CHECK(got == want);
    CHECK(bulk.next() == one.next());  // the stream goes on where the calls would have left it
  }
}
