#include "tuner/flow/compile_ahead.h"

#include <chrono>

#include "device/jit/compile_service.h"

namespace qt::tune {

CompileAhead::CompileAhead(int sm, int threads) : sm_(sm) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

CompileAhead::~CompileAhead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void CompileAhead::enqueue(const kernels::KernelFamily& family, const std::vector<kernels::Point>& points) {
  if (threads_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const kernels::Point& p : points) queue_.push_back({&family, p});
  }
  cv_.notify_all();
}

int64_t CompileAhead::compiled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

double CompileAhead::seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seconds_;
}

void CompileAhead::loop() {
  compile::CompileService service;
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      item = queue_.front();
      queue_.pop_front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      service.compile_cached(service.request_for(*item.family, item.point, sm_));
    } catch (const std::exception&) {
      // The worker compiles the point again and records the failure against the candidate.
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

}  // namespace qt::tune
