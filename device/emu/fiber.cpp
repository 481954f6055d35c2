#include "device/emu/fiber.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define QT_EMU_ASAN 1
#endif

#if !defined(__x86_64__)
#error "device/emu/fiber.cpp: the context switch is written for x86-64"
#endif

// qt_emu_switch(void** save_sp, void* new_sp): push the callee-saved registers, store rsp, load the other
// stack, pop its registers and return into it. MXCSR and the x87 control word are not switched: no fiber
// changes the floating-point environment. qt_emu_fiber_start runs a fresh context: entry in r12, arg in r13.
asm(R"(
  .text
  .globl qt_emu_switch
  .type qt_emu_switch, @function
qt_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size qt_emu_switch, .-qt_emu_switch

  .globl qt_emu_fiber_start
  .type qt_emu_fiber_start, @function
qt_emu_fiber_start:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size qt_emu_fiber_start, .-qt_emu_fiber_start
)");

extern "C" void qt_emu_switch(void** save_sp, void* new_sp);
extern "C" void qt_emu_fiber_start();

namespace qt::emu {

void switch_context(Context* from, Context to) { qt_emu_switch(&from->sp, to.sp); }

void switch_fiber(Context* from, void** fake_stack, Context to, const StackExtent& to_stack) {
#if QT_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack, to_stack.lo, to_stack.size);
#else
  (void)fake_stack;
  (void)to_stack;
#endif
  switch_context(from, to);
#if QT_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack ? *fake_stack : nullptr, nullptr, nullptr);
#endif
}

void fiber_started() {
#if QT_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

StackExtent thread_stack() {
  StackExtent s;
#if QT_EMU_ASAN
  pthread_attr_t attr;
  void* addr = nullptr;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &addr, &s.size);
  pthread_attr_destroy(&attr);
  s.lo = addr;
#endif
  return s;
}

void forget_stack_frames(const StackExtent& stack) {
#if QT_EMU_ASAN
  __asan_unpoison_memory_region(stack.lo, stack.size);
#else
  (void)stack;
#endif
}

void make_context(Context* ctx, void* /*stack_lo*/, void* stack_hi, FiberEntry entry, void* arg) {
  // After the initial "ret" into qt_emu_fiber_start, rsp must be 16-byte aligned so that the call inside
  // it enters `entry` with the ABI's alignment.
  uintptr_t top = reinterpret_cast<uintptr_t>(stack_hi) & ~uintptr_t{15};
  top -= 16;
  auto* frame = reinterpret_cast<uint64_t*>(top - 56);
  frame[0] = 0;                                  // r15
  frame[1] = 0;                                  // r14
  frame[2] = reinterpret_cast<uint64_t>(arg);    // r13
  frame[3] = reinterpret_cast<uint64_t>(entry);  // r12
  frame[4] = 0;                                  // rbx
  frame[5] = 0;                                  // rbp
  frame[6] = reinterpret_cast<uint64_t>(&qt_emu_fiber_start);
  ctx->sp = frame;
}

StackPool::StackPool(size_t count) : count_(count) {
  mapping_bytes_ = (count + 1) * kFiberRegionBytes;
  mapping_ = ::mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw qt::Error("emu: cannot reserve fiber stacks: " + std::string(std::strerror(errno)), kExitFailure);
  }
  const uintptr_t raw = reinterpret_cast<uintptr_t>(mapping_);
  base_ = (raw + kFiberRegionBytes - 1) & ~(kFiberRegionBytes - 1);
  for (size_t i = 0; i < count; ++i) {
    if (::mprotect(reinterpret_cast<void*>(region(i)), kFiberGuardBytes, PROT_NONE) != 0 ||
        ::mprotect(reinterpret_cast<void*>(region(i) + 2 * kFiberGuardBytes), kFiberGuardBytes, PROT_NONE) != 0) {
      const std::string why = std::strerror(errno);
      ::munmap(mapping_, mapping_bytes_);
      mapping_ = nullptr;
      throw qt::Error("emu: cannot place the guard pages of fiber stacks (" + why +
                          "): the process has run out of memory maps (vm.max_map_count); run fewer emulator threads",
                      kExitFailure);
    }
  }
}

StackPool::~StackPool() {
  if (!mapping_) return;
#if QT_EMU_ASAN
  // Frames of fibers that never returned leave AddressSanitizer's stack poison behind, and a later mapping at
  // these addresses (another Worker's shared-memory shadow, say) would inherit it.
  for (size_t i = 0; i < count_; ++i)
    __asan_unpoison_memory_region(stack_lo(i), static_cast<char*>(stack_hi(i)) - static_cast<char*>(stack_lo(i)));
#endif
  ::munmap(mapping_, mapping_bytes_);
}

FiberCtx* StackPool::ctx(size_t i) const { return reinterpret_cast<FiberCtx*>(region(i) + kFiberCtxOffset); }
void* StackPool::stack_lo(size_t i) const { return reinterpret_cast<void*>(region(i) + 3 * kFiberGuardBytes); }
// Stack tops are staggered by a few cache lines: with every region aligned to 256 KiB, the hot top-of-stack
// lines of all fibers would otherwise map to the same cache sets and evict each other on every switch.
void* StackPool::stack_hi(size_t i) const {
  return reinterpret_cast<void*>(region(i) + kFiberRegionBytes - (i % 61) * 64);
}

StackExtent StackPool::extent(size_t i) const {
  char* lo = static_cast<char*>(stack_lo(i));
  return StackExtent{lo, static_cast<size_t>(static_cast<char*>(stack_hi(i)) - lo)};
}

bool StackPool::is_guard(uintptr_t addr) const {
  if (addr < base_ || addr >= base_ + count_ * kFiberRegionBytes) return false;
  const uintptr_t off = (addr - base_) % kFiberRegionBytes;
  return off < kFiberGuardBytes || (off >= 2 * kFiberGuardBytes && off < 3 * kFiberGuardBytes);
}

}  // namespace qt::emu
