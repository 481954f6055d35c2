#pragma once
// How much memory this process could still take, for refusing work up front instead of being killed by
// the kernel's out-of-memory handler halfway through it.
#include <cstdint>
#include <string>

namespace qt {

// The host's MemAvailable, or less when this process's cgroup has a lower limit; 0 when neither is known.
uint64_t host_memory_available();

// "12.3 GB", "4.1 MB", "512 bytes": a byte count as the messages about memory give it.
std::string bytes_text(uint64_t bytes);

}  // namespace qt
