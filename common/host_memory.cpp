#include "common/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace qt {
namespace {

// The first number in `path`, or 0 when it cannot be read ("max" reads as 0: no limit).
uint64_t first_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  return in >> v ? v : 0;
}

uint64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

// This process's cgroup v2 folder ("0::/some/group" in /proc/self/cgroup).
std::string cgroup_dir() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
  return "/sys/fs/cgroup";
}

}  // namespace

uint64_t host_memory_available() {
  uint64_t have = meminfo_available();
  // The limit of this process's group, less what the group already uses.
  const std::string dir = cgroup_dir();
  const uint64_t limit = first_number(dir + "/memory.max");
  if (limit > 0) {
    const uint64_t used = first_number(dir + "/memory.current");
    const uint64_t left = limit > used ? limit - used : 0;
    have = have == 0 ? left : std::min(have, left);
  }
  return have;
}

std::string bytes_text(uint64_t bytes) {
  char b[48];
  if (bytes >= 1000000000) std::snprintf(b, sizeof b, "%.1f GB", double(bytes) / 1e9);
  else if (bytes >= 1000000) std::snprintf(b, sizeof b, "%.1f MB", double(bytes) / 1e6);
  else std::snprintf(b, sizeof b, "%llu bytes", static_cast<unsigned long long>(bytes));
  return b;
}

}  // namespace qt
