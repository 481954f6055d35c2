#pragma once
// Cache flush between timed repetitions, sized from the device: twice the largest cache level, so the
// candidate starts with cold weights as a decode matvec does in the model.
#include <cstddef>
#include <vector>

namespace qt::tune {

// Largest CPU cache (bytes) from /sys/devices/system/cpu/cpu0/cache; `fallback` if unreadable.
size_t cpu_last_level_cache_bytes(size_t fallback = 32u << 20);

class CacheFlusher {
 public:
  explicit CacheFlusher(size_t bytes);
  void operator()();
  size_t bytes() const { return buf_.size(); }

 private:
  std::vector<unsigned char> buf_;
  unsigned char round_ = 0;
};

}  // namespace qt::tune
