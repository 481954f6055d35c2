#pragma once
// What /proc/self/smaps says about the mapping that holds an address: the tests of memory placement read the
// kernel's own account (resident bytes, huge-page eligibility) rather than trusting what the code asked for.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace qt::test {

// The number after `field:` (for example "Rss", in kB, or "THPeligible") in the smaps entry whose address
// range holds p; -1 if no entry holds p or the entry has no such field.
inline int64_t smaps_value(const void* p, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  const std::string key = field + ":";
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
    } else if (inside && line.rfind(key, 0) == 0) {
      return std::stoll(line.substr(key.size()));
    }
  }
  return -1;
}

}  // namespace qt::test
