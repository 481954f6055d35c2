#include "common/parallel_ranges.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace qt {

void parallel_ranges(int64_t n, double work, const std::function<void(int64_t, int64_t)>& fn, double min_work) {
  if (n <= 0) return;
  const int64_t threads =
      work < min_work ? 1 : std::min<int64_t>(n, std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(fn, n * t / threads, n * (t + 1) / threads);
  fn(0, n / threads);
  for (std::thread& t : pool) t.join();
}

}  // namespace qt
