// Fuzz entry for Kernel Tuner caches.
#include "tests/fuzz/fuzz_support.h"
#include "tuner/replay/kt_cache.h"

namespace qt::fuzz {

using namespace detail;

void kt_cache(const uint8_t* data, size_t size) {
  expect_clean("kt_cache", [&] { tune::parse_kt_cache(std::string(text_of(data, size)), "cache.json"); });
}

}  // namespace qt::fuzz
