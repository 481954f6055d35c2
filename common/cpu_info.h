#pragma once
// Facts about this CPU that tuning and fingerprints need.
#include <cstddef>

namespace qt {

// The largest cache of cpu0 (sysfs), or `fallback` when it cannot be read.
size_t cpu_last_level_cache_bytes(size_t fallback = 32u << 20);

}  // namespace qt
