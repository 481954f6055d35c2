#include "common/cpu_info.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace qt {

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

}  // namespace qt
