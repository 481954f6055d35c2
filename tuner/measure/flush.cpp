#include "tuner/measure/flush.h"

#include <fstream>
#include <string>

namespace qt::tune {

size_t cpu_last_level_cache_bytes(size_t fallback) {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(f >> s) || s.empty()) continue;
    size_t mult = 1;
    if (s.back() == 'K') mult = 1024, s.pop_back();
    else if (s.back() == 'M') mult = 1024 * 1024, s.pop_back();
    try {
      best = std::max(best, size_t(std::stoull(s)) * mult);
    } catch (...) {
    }
  }
  return best ? best : fallback;
}

CacheFlusher::CacheFlusher(size_t bytes) : buf_(bytes, 0) {}

void CacheFlusher::operator()() {
  // Writing (not just reading) evicts dirty and clean lines alike; the changing value defeats elision.
  ++round_;
  volatile unsigned char* p = buf_.data();
  for (size_t i = 0; i < buf_.size(); i += 64) p[i] = round_;
}

}  // namespace qt::tune
