#pragma once
// The race shadow of global memory for one launch: a Cell (race_shadow.h) per byte that the launch touches,
// in pages allocated on first touch and dropped with the launch. Blocks run on several host threads at
// once, so each page is updated under a lock; the launch's clock (ticked by fences and atomics) and each
// block's fence times order accesses across blocks.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "device/emu/race_shadow.h"

namespace qt::emu::exec {

class GlobalShadow : public FenceLog {
 public:
  static constexpr uintptr_t kPageBytes = 4096;
  GlobalShadow() = default;
  ~GlobalShadow() override;
  GlobalShadow(const GlobalShadow&) = delete;
  GlobalShadow& operator=(const GlobalShadow&) = delete;

  // A host thread's memo of the pages it used (pages live until the launch ends), so that the page map's
  // lock is taken once per page and host thread.
  struct PageCache {
    static constexpr size_t kSlots = 256;
    const GlobalShadow* owner = nullptr;
    uintptr_t page[kSlots] = {};
    Cell* cells[kSlots] = {};
  };

  struct Hit {
    Conflict conflict = Conflict::kNone;
    uintptr_t addr = 0;  // the byte that conflicted
    AccessSet other;     // the set it conflicted with
  };
  // Checks and records an access of [a, a + n); stops at the first conflicting byte.
  Hit access(PageCache& cache, uintptr_t a, uint32_t n, const Accessor& acc, bool write, uint64_t loc);

  // The shadow may take `max_bytes` (0: as much as the host has to spare); a launch that needs more ends with
  // a qt::Error saying so, not in the kernel's out-of-memory killer.
  void limit(uint64_t max_bytes) { budget_ = max_bytes; }

  uint32_t now() const { return time_.load(std::memory_order_relaxed); }
  uint32_t tick() { return time_.fetch_add(1, std::memory_order_relaxed) + 1; }
  void fence(uint32_t block);
  bool fenced_between(uint32_t block, uint32_t after, uint32_t before) const override;

 private:
  Cell* page(PageCache& cache, uintptr_t page_base);
  void charge_page();  // under map_mu_
  std::mutex map_mu_;
  uint64_t budget_ = 0, bytes_ = 0, next_host_check_ = 0;
  std::unordered_map<uintptr_t, Cell*> pages_;
  // Cell updates are a few dozen instructions: spin rather than sleep on a contended page.
  struct SpinLock {
    std::atomic_flag f = ATOMIC_FLAG_INIT;
    void lock() {
      while (f.test_and_set(std::memory_order_acquire)) __builtin_ia32_pause();
    }
    void unlock() { f.clear(std::memory_order_release); }
  };
  std::array<SpinLock, 256> stripes_;
  std::atomic<uint32_t> time_{0};
  mutable std::mutex fence_mu_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> fences_;
};

}  // namespace qt::emu::exec
