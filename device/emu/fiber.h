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

// Where a context's stack lies. Only AddressSanitizer reads it: it must be told of every stack switch, or it
// takes the other stack's frames for a stack overflow.
struct StackExtent {
  const void* lo = nullptr;
  size_t size = 0;
};
// switch_context, announced to AddressSanitizer when the build uses it. `fake_stack` keeps the leaving
// context's fake-stack handle while it is suspended (null for one that is never resumed); `to_stack` is the
// stack `to` runs on.
void switch_fiber(Context* from, void** fake_stack, Context to, const StackExtent& to_stack);
// The first call on a fresh context: it entered without returning from switch_fiber, so it finishes the
// switch announcement itself.
void fiber_started();
// The stack of the calling host thread (empty without AddressSanitizer, its only reader).
StackExtent thread_stack();
// A finished fiber switches away instead of returning and leaves its last frames' redzones poisoned: the
// next fiber on that stack must start from clean shadow memory.
void forget_stack_frames(const StackExtent& stack);

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
  StackExtent extent(size_t i) const;
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
