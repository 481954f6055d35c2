#include "device/emu/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/host_memory.h"

namespace qt::emu {

namespace {
constexpr uintptr_t kReserveBytes = uintptr_t{1} << 38;  // 256 GiB of address space, no memory
constexpr uintptr_t kPage = 4096;

std::string hex(uintptr_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

Arena& Arena::instance() {
  static Arena arena;
  return arena;
}

Arena::Arena() {
  void* p = ::mmap(nullptr, kReserveBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw qt::Error("emu: cannot reserve device address space: " + std::string(std::strerror(errno)), kExitFailure);
  lo_ = reinterpret_cast<uintptr_t>(p);
  span_ = kReserveBytes;
  next_ = lo_ + kPage;  // a guard page before the first allocation
}

uintptr_t Arena::allocate(size_t bytes) {
  if (bytes == 0) bytes = 1;
  // Checked before the rounding below, which would wrap for sizes near 2^64 and hand out one page.
  if (bytes > span_ - 2 * kPage) {
    throw qt::Error("emu: cannot allocate " + std::to_string(bytes) + " bytes of device memory: more than the " +
                        std::to_string(span_ >> 30) + " GiB device address space",
                    kExitFailure);
  }
  const size_t rounded = (bytes + 15) & ~size_t{15};
  const size_t pages = (rounded + kPage - 1) & ~(kPage - 1);
  // The pages are filled below, so they must exist now: more than the host can give would end in the
  // kernel's out-of-memory killer, not in an error.
  if (const uint64_t have = host_memory_available(); have > 0 && pages > have) {
    throw qt::Error("emu: cannot allocate " + bytes_text(bytes) + " of device memory: the host has " +
                        bytes_text(have) + " available",
                    kExitFailure);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (next_ + pages + kPage > lo_ + span_) throw qt::Error("emu: device address space exhausted", kExitFailure);
  const uintptr_t start = next_;
  if (::mprotect(reinterpret_cast<void*>(start), pages, PROT_READ | PROT_WRITE) != 0) {
    throw qt::Error("emu: cannot allocate " + std::to_string(bytes) + " bytes of device memory: " +
                        std::strerror(errno),
                    kExitFailure);
  }
  next_ = start + pages + kPage;  // the following page stays PROT_NONE: the guard after this allocation
  const uintptr_t base = start + pages - rounded;
  std::memset(reinterpret_cast<void*>(start), 0xFF, pages);
  live_[base] = Allocation{base, bytes, next_id_++};
  live_bytes_ += bytes;
  mappings_[base] = start;
  return base;
}

void Arena::free(uintptr_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(base);
  if (it == live_.end()) throw qt::Error("emu: free of " + hex(base) + ", which is not a live device allocation", kExitFailure);
  const uintptr_t start = mappings_.at(base);
  const size_t len = ((base - start) + ((it->second.bytes + 15) & ~size_t{15}) + kPage - 1) & ~(kPage - 1);
  // Released pages become inaccessible and are never handed out again: a use after free faults.
  ::mprotect(reinterpret_cast<void*>(start), len, PROT_NONE);
  ::madvise(reinterpret_cast<void*>(start), len, MADV_DONTNEED);
  freed_[base] = {it->second, start};
  live_bytes_ -= it->second.bytes;
  live_.erase(it);
  mappings_.erase(base);
}

void Arena::check_range(uintptr_t p, size_t bytes, const char* what) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(p);
  if (it != live_.begin()) {
    --it;
    const Allocation& a = it->second;
    // Subtractions, not p + bytes: a huge byte count must not wrap around and pass.
    if (p >= a.base && bytes <= a.bytes && p - a.base <= a.bytes - bytes) return;
  }
  throw qt::Error(std::string("emu: ") + what + " of " + std::to_string(bytes) + " bytes at " + hex(p) +
                      " is outside every live device allocation",
                  kExitFailure);
}

uint64_t Arena::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}

std::vector<Allocation> Arena::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Allocation> v;
  v.reserve(live_.size());
  for (const auto& [base, a] : live_) v.push_back(a);
  return v;
}

std::string Arena::describe(uintptr_t p) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto near = [&](const Allocation& a, const char* state) {
    std::string s;
    if (p < a.base) {
      s = std::to_string(a.base - p) + " bytes before the start of ";
    } else if (p >= a.base + a.bytes) {
      s = std::to_string(p - (a.base + a.bytes)) + " bytes past the end of ";
    } else {
      s = "at offset " + std::to_string(p - a.base) + " of ";
    }
    return s + state + "allocation #" + std::to_string(a.id) + " (base " + hex(a.base) + ", " +
           std::to_string(a.bytes) + " bytes)";
  };
  // The closest allocation (live or freed) by distance.
  const Allocation* best = nullptr;
  bool best_freed = false;
  uintptr_t best_d = ~uintptr_t{0};
  auto consider = [&](const Allocation& a, bool freed) {
    uintptr_t d = p < a.base ? a.base - p : (p >= a.base + a.bytes ? p - (a.base + a.bytes) : 0);
    if (d < best_d) {
      best_d = d;
      best = &a;
      best_freed = freed;
    }
  };
  for (auto it = live_.lower_bound(p > (1u << 20) ? p - (1u << 20) : 0); it != live_.end() && it->first < p + (1u << 20); ++it) consider(it->second, false);
  for (auto it = freed_.lower_bound(p > (1u << 20) ? p - (1u << 20) : 0); it != freed_.end() && it->first < p + (1u << 20); ++it) consider(it->second.first, true);
  if (!best) return "not inside any device allocation";
  return near(*best, best_freed ? "freed " : "");
}

}  // namespace qt::emu
