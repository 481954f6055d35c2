#include "common/rng.h"

#include <atomic>

#include "common/parallel_ranges.h"

namespace qt {

void Rng::fill_bytes(uint8_t* out, size_t n) {
  // below(256) rejects a draw of UINT64_MAX - 255 or more (256 of 2^64 values); a range that meets one stops
  // and the whole fill is redone in turn, which shifts every later draw as the calls would.
  constexpr uint64_t kLimit = UINT64_MAX - UINT64_MAX % 256;
  const uint64_t start = state_;
  std::atomic<bool> rejected{false};
  parallel_ranges(int64_t(n), double(n) * 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t x = mix(start + uint64_t(i + 1) * kGamma);
      if (x >= kLimit) {
        rejected = true;
        return;
      }
      out[i] = uint8_t(x);
    }
  });
  if (!rejected) {
    state_ = start + uint64_t(n) * kGamma;
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = uint8_t(below(256));
}

}  // namespace qt
