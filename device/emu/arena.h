#pragma once
// Emulated global memory: every allocation lives in one reserved address range, ends flush against an
// inaccessible guard page and is never reused after free, so any access outside a live allocation is either
// reported by the access hooks (exact, with thread and address) or faults on a guard page.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace qt::emu {

struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint64_t id = 0;
};

class Arena {
 public:
  static Arena& instance();  // one per process: kernel modules only need its range
  uintptr_t lo() const { return lo_; }
  uintptr_t span() const { return span_; }

  uintptr_t allocate(size_t bytes);  // 16-byte aligned, filled with 0xFF
  void free(uintptr_t base);         // throws qt::Error for an address that is not a live allocation's base
  // Throws unless [p, p + bytes) lies inside one live allocation (host copies).
  void check_range(uintptr_t p, size_t bytes, const char* what) const;
  std::vector<Allocation> snapshot() const;  // live allocations sorted by base
  uint64_t live_bytes() const;               // of the live allocations
  // "12 bytes past the end of allocation #3 (base 0x..., 4096 bytes)" or "not inside any allocation".
  std::string describe(uintptr_t p) const;

 private:
  Arena();
  mutable std::mutex mu_;
  uintptr_t lo_ = 0, span_ = 0, next_ = 0;
  uint64_t live_bytes_ = 0;
  uint64_t next_id_ = 1;
  std::map<uintptr_t, Allocation> live_;                         // by base
  std::map<uintptr_t, std::pair<Allocation, uintptr_t>> freed_;  // by base: allocation + mapping start
  std::map<uintptr_t, uintptr_t> mappings_;                      // base -> mapping start (page aligned)
};

}  // namespace qt::emu
