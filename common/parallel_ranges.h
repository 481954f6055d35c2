#pragma once
// Splits [0, n) into contiguous ranges run on every core, for CPU references large enough to be worth it:
// below `min_work` (the caller's estimate of its operations) everything runs on the calling thread. The first
// exception a range throws is rethrown on the calling thread after every range has ended.
#include <cstdint>
#include <functional>

namespace qt {

void parallel_ranges(int64_t n, double work, const std::function<void(int64_t begin, int64_t end)>& fn,
                     double min_work = double(1 << 24));

}  // namespace qt
