#pragma once
// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a pool of n
// threads starts n-1 workers. Workers spin for 100 us before sleeping: decode runs hundreds of small matvecs
// per token, and a sleeping wake-up per matvec would cost more than the matvec itself.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qt::rt {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) over [0, n) in chunks of `grain` items, spread over all threads; returns when done.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<int64_t> next_{0};
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
};

// Default thread count: the hardware threads available to this process.
int default_thread_count();

}  // namespace qt::rt
