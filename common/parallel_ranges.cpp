#include "common/parallel_ranges.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace qt {

void parallel_ranges(int64_t n, double work, const std::function<void(int64_t, int64_t)>& fn, double min_work) {
  if (n <= 0) return;
  const int64_t threads =
      work < min_work ? 1 : std::min<int64_t>(n, std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency())));
  // A range that throws (a failed write, say) must not terminate the program from its thread: the first
  // exception is rethrown on the calling thread once every range has ended.
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto run = [&](int64_t t) {
    try {
      fn(n * t / threads, n * (t + 1) / threads);
    } catch (...) {
      errors[size_t(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
  run(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace qt
