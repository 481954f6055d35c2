#pragma once
// User-level fibers for the emulator: one per CUDA thread. A register-only context switch (callee-saved
// registers; no signal-mask syscall as in swapcontext) and stack regions
// laid out as kernels_src/common/emu_abi.h requires: each region is kFiberRegionBytes, aligned to its size,
// [guard page][FiberCtx page][guard page][stack ... top], so a kernel finds its FiberCtx from any stack address.
#include <cstddef>
#include <cstdint>

#include "kernels_src/common/emu_abi.h"

namespace qt::emu {

using FiberEntry = void (*)(void* arg);

// Saved stack pointer of a suspended context. `switch_context(&from, to)` saves the running context into
// `from` and resumes `to`.
struct Context {
  void* sp = nullptr;
};
void switch_context(Context* from, Context to);
// Prepares `ctx` so that switching to it runs entry(arg) on the stack [stack_lo, stack_hi). entry must never
// return (it switches away for good instead).
void make_context(Context* ctx, void* stack_lo, void* stack_hi, FiberEntry entry, void* arg);

// A block of `count` fiber stack regions reserved with MAP_NORESERVE (pages are touched only when used).
class StackPool {
 public:
  explicit StackPool(size_t count);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  size_t count() const { return count_; }
  FiberCtx* ctx(size_t i) const;
  void* stack_lo(size_t i) const;  // lowest usable stack byte (above the second guard page)
  void* stack_hi(size_t i) const;  // one past the top
  // True when `addr` lies in one of the guard pages (a fiber stack overflow).
  bool is_guard(uintptr_t addr) const;

 private:
  uintptr_t region(size_t i) const { return base_ + i * kFiberRegionBytes; }
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  uintptr_t base_ = 0;
  size_t count_ = 0;
};

}  // namespace qt::emu
