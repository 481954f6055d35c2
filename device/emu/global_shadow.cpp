#include "device/emu/global_shadow.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"
#include "common/host_memory.h"

namespace qt::emu::exec {

GlobalShadow::~GlobalShadow() {
  for (auto& [base, cells] : pages_) std::free(cells);
}

Cell* GlobalShadow::page(PageCache& cache, uintptr_t page_base) {
  if (cache.owner != this) cache = PageCache{this, {}, {}};
  const size_t slot = (page_base / kPageBytes) % PageCache::kSlots;
  if (cache.cells[slot] && cache.page[slot] == page_base) return cache.cells[slot];
  std::lock_guard<std::mutex> lock(map_mu_);
  if (!pages_.count(page_base)) charge_page();
  Cell*& cells = pages_[page_base];
  if (!cells) {
    // An all-zero Cell is an untouched byte. Zeroed by writing, not by calloc: calloc's fresh pages map the
    // kernel's shared zero page on the first check's read, and the record's write then copies it and flushes
    // every other host thread's TLB (an interprocessor interrupt, a VM exit on a virtual machine). That was a
    // third of an emulated wgmma GEMM's time (system time 19 of 70 s; 51.1 s wall, 31.6 s written first).
    cells = static_cast<Cell*>(std::malloc(kPageBytes * sizeof(Cell)));
    if (!cells) throw std::bad_alloc();
    std::memset(static_cast<void*>(cells), 0, kPageBytes * sizeof(Cell));
  }
  cache.page[slot] = page_base;
  cache.cells[slot] = cells;
  return cells;
}

void GlobalShadow::charge_page() {
  // The host is asked once per step of this many shadow bytes, and the launch stops while that much is left.
  constexpr uint64_t kHostStep = uint64_t{256} << 20;
  bytes_ += kPageBytes * sizeof(Cell);
  if (budget_ > 0) {
    if (bytes_ > budget_)
      throw qt::Error("the race checks need more than the " + bytes_text(budget_) +
                          " left of the emulator's memory to check this launch (it runs without them in less)",
                      kExitFailure);
    return;
  }
  if (bytes_ < next_host_check_) return;
  next_host_check_ = bytes_ + kHostStep;
  if (const uint64_t have = host_memory_available(); have > 0 && have < kHostStep)
    throw qt::Error("the race checks need more memory than the host has left (" + bytes_text(have) +
                        ") to check this launch (it runs without them in less)",
                    kExitFailure);
}

GlobalShadow::Hit GlobalShadow::access(PageCache& cache, uintptr_t a, uint32_t n, const Accessor& acc, bool write,
                                         uint64_t loc) {
  Hit hit;
  const uint32_t t = now();
  while (n > 0) {
    const uintptr_t base = a & ~(kPageBytes - 1);
    const uint32_t in_page = static_cast<uint32_t>(std::min<uintptr_t>(n, base + kPageBytes - a));
    Cell* cells = page(cache, base);
    std::lock_guard<SpinLock> lock(stripes_[(base / kPageBytes) % stripes_.size()]);
    for (uint32_t i = 0; i < in_page; ++i) {
      Cell& c = cells[a - base + i];
      const Conflict k = check_and_record(c, acc, write, t, loc, this);
      if (k != Conflict::kNone) {
        hit.conflict = k;
        hit.addr = a + i;
        hit.other = k == Conflict::kWrite ? c.w : c.r;
        return hit;
      }
    }
    a += in_page;
    n -= in_page;
  }
  return hit;
}

void GlobalShadow::fence(uint32_t block) {
  const uint32_t t = tick();
  std::lock_guard<std::mutex> lock(fence_mu_);
  fences_[block].push_back(t);
}

bool GlobalShadow::fenced_between(uint32_t block, uint32_t after, uint32_t before) const {
  std::lock_guard<std::mutex> lock(fence_mu_);
  auto it = fences_.find(block);
  if (it == fences_.end()) return false;
  const auto& v = it->second;  // increasing: fences of one block run on one host thread in order
  auto f = std::upper_bound(v.begin(), v.end(), after);
  return f != v.end() && *f < before;
}

}  // namespace qt::emu::exec
