// The memory behind repacked weights: big buffers are placed where the kernel can back them with huge pages,
// small ones stay on the heap, and both behave as plain zeroed memory whichever way they came.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

#include "common/large_pages.h"
#include "tests/proc_smaps.h"

namespace {

bool thp_enabled() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[never]") == std::string::npos && !s.empty();
}

}  // namespace

TEST_CASE("a buffer of 2 MiB or more starts on a 2 MiB boundary, huge-page eligible, zeroed and writable") {
  const size_t bytes = 5 * qt::LargePageBuffer::kHugePage + 12345;  // a tail that is no whole huge page
  qt::LargePageBuffer b(bytes);
  REQUIRE(b.size() == bytes);
  REQUIRE(b.advised_huge());
  CHECK(reinterpret_cast<uintptr_t>(b.data()) % qt::LargePageBuffer::kHugePage == 0);
  for (size_t i = 0; i < bytes; i += 4093) REQUIRE(b.data()[i] == 0);
  CHECK(b.data()[bytes - 1] == 0);
  for (size_t i = 0; i < bytes; ++i) b.data()[i] = uint8_t(i * 31);
  for (size_t i = 0; i < bytes; i += 997) REQUIRE(b.data()[i] == uint8_t(i * 31));
  if (thp_enabled()) {
    CHECK(qt::test::smaps_value(b.data(), "THPeligible") == 1);
  } else {
    WARN("transparent huge pages are off on this machine: only the placement was checked");
  }
}

TEST_CASE("a buffer under 2 MiB comes from the heap, 64-byte aligned and zeroed, even when empty") {
  for (size_t bytes : {size_t(0), size_t(1), size_t(100), qt::LargePageBuffer::kHugePage - 1}) {
    qt::LargePageBuffer b(bytes);
    CHECK_FALSE(b.advised_huge());
    CHECK(b.size() == bytes);
    REQUIRE(b.data() != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(b.data()) % qt::LargePageBuffer::kAlign == 0);
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; ++i) nonzero += b.data()[i] != 0;
    CHECK(nonzero == 0);
  }
}

TEST_CASE("moving a buffer hands over its memory and leaves the source empty") {
  qt::LargePageBuffer a(3 * qt::LargePageBuffer::kHugePage);
  a.data()[7] = 42;
  const uint8_t* p = a.data();
  qt::LargePageBuffer b(std::move(a));
  CHECK(b.data() == p);
  CHECK(b.data()[7] == 42);
  CHECK(a.data() == nullptr);
  CHECK(a.size() == 0);
  qt::LargePageBuffer c(100);
  c = std::move(b);
  CHECK(c.data() == p);
  CHECK(c.advised_huge());
  CHECK(b.data() == nullptr);
}
