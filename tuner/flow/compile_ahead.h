#pragma once
// NVRTC compiles on CPU threads while the device measures: points of the families about to be tuned are
// compiled for the target architecture into the compile service's on-disk cache, where the worker's own
// compile of the same point then finds them. A point the worker reaches first is compiled there, so the
// threads only ever save time.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::tune {

class CompileAhead {
 public:
  // `threads` == 0 compiles nothing (enqueue() drops its points).
  CompileAhead(int sm, int threads);
  ~CompileAhead();  // drops what is queued and waits for the compiles running
  CompileAhead(const CompileAhead&) = delete;
  CompileAhead& operator=(const CompileAhead&) = delete;

  void enqueue(const kernels::KernelFamily& family, const std::vector<kernels::Point>& points);
  int64_t compiled() const;  // points done (compiled or found in the cache), failures included
  double seconds() const;    // the threads' compile time, summed

 private:
  void loop();
  struct Item {
    const kernels::KernelFamily* family;
    kernels::Point point;
  };
  int sm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  int64_t done_ = 0;
  double seconds_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace qt::tune
