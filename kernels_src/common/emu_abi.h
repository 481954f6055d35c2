#pragma once
// Host-only ABI between a JIT-compiled kernel module (built from qt_cuda.h with QT_EMU) and the executor in
// runtime/emu. The module never links against the executor: the executor hands it an Api table at load time
// (qt_emu_bind) and every per-thread built-in is found from the fiber's stack address, so a module works in
// any process that loads it. Change kAbiVersion with any layout change; the JIT cache key includes it.
#include <cstdint>

namespace qt::emu {

constexpr uint32_t kAbiVersion = 6;
// Every fiber's stack lives in its own region of this size, aligned to it; the FiberCtx sits at a fixed
// offset above the region's guard page, so masking any stack address yields the running thread's context.
constexpr uintptr_t kFiberRegionBytes = uintptr_t{256} * 1024;
constexpr uintptr_t kFiberGuardBytes = 4096;
constexpr uintptr_t kFiberCtxOffset = kFiberGuardBytes;

struct Site {
  const char* file;
  const char* function;
  uint32_t line;
  uint32_t column;
};

struct Uint3 {
  uint32_t x, y, z;
};

struct FiberCtx {
  Uint3 thread_idx, block_idx, block_dim, grid_dim;
  // The block's shared window widened by a guard band on each side, so that an access just outside the
  // window still reaches the executor's bounds check instead of being taken for a stack access; while a
  // wgmma holds registers of this thread (local arrays on its stack), widened to take them in too.
  uintptr_t smem_lo;
  uintptr_t smem_span;
  void* fiber;          // executor-private
};

enum class ShflMode : int { kUp = 0, kDown = 1, kBfly = 2, kIdx = 3 };
enum class VoteKind : int { kBallot = 0, kAny = 1, kAll = 2 };
enum class BarrierKind : int { kPlain = 0, kCount = 1, kAnd = 2, kOr = 3 };
enum class MmaKind : int { kF16F32 = 0, kBf16F32 = 1, kS8S32 = 2 };  // kS8S32: m16n8k32, int32 bits in C/D
enum class AtomicOp : int { kAdd, kSub, kMin, kMax, kExch, kCas, kAnd, kOr, kXor };
enum class AtomicType : int { kI32, kU32, kU64, kF32, kF64 };

// One wgmma.mma_async m64nNk16 of a thread (f16 or bf16 inputs, f32 accumulator of N/2 floats).
struct WgmmaCall {
  float* d;
  const uint32_t* a;  // A fragment (4 registers) for the register-A form, else null (A from desc_a)
  uint64_t desc_a, desc_b;
  uint32_t n;
  uint8_t bf16, trans_a, trans_b, scale_d;
};

// Access flags passed to Api::access.
constexpr uint32_t kAccessWrite = 1;
constexpr uint32_t kAccessAligned = 2;  // the compiler assumed natural alignment (a vector/scalar type access)
constexpr uint32_t kAccessVolatile = 4;  // a volatile access: strong, never a data race with another strong one

struct Api {
  uint32_t abi_version;
  uintptr_t arena_lo;    // global (device) memory arena: every allocation lies inside
  uintptr_t arena_span;
  void (*access)(FiberCtx*, const void* p, uint32_t bytes, uint32_t flags, const void* code_addr);
  int (*barrier)(FiberCtx*, BarrierKind, int pred, const Site*);
  void (*syncwarp)(FiberCtx*, uint32_t mask, const Site*);
  uint64_t (*shfl)(FiberCtx*, ShflMode, uint32_t mask, uint64_t value, uint32_t b, uint32_t c, uint32_t bytes,
                   const Site*);
  uint32_t (*vote)(FiberCtx*, VoteKind, uint32_t mask, int pred, const Site*);
  void (*ldmatrix)(FiberCtx*, uint32_t num, bool trans, uint32_t smem_addr, uint32_t* out, const Site*);
  void (*mma)(FiberCtx*, MmaKind, float* d, const uint32_t* a, const uint32_t* b, const float* c, const Site*);
  void (*cp_async)(FiberCtx*, uint32_t smem_addr, const void* src, uint32_t cp_size, uint32_t src_size,
                   const Site*);
  void (*cp_async_commit)(FiberCtx*);
  void (*cp_async_wait)(FiberCtx*, uint32_t pending_allowed, const Site*);
  uint64_t (*atomic)(FiberCtx*, AtomicOp, AtomicType, void* p, uint64_t value, uint64_t compare, const Site*);
  void* (*static_shared)(FiberCtx*, const void* tag, uint32_t bytes, uint32_t align, const Site*);
  void* (*dynamic_shared)(FiberCtx*);
  uint32_t (*cvta_shared)(FiberCtx*, const void* p, const Site*);
  void (*trap)(FiberCtx*, const char* message, const Site*);
  void (*fence)(FiberCtx*);  // __threadfence: orders this block's global accesses before its later atomics
  // Hopper (sm_90a): kernels_src/common/README.md, "Hopper".
  void (*check_wgmma_desc)(FiberCtx*, uint32_t smem_addr, uint32_t lbo, uint32_t sbo, int swizzle, const Site*);
  void (*wgmma)(FiberCtx*, const WgmmaCall*, const Site*);
  void (*wgmma_fence)(FiberCtx*, const Site*);
  void (*wgmma_commit)(FiberCtx*, const Site*);
  void (*wgmma_wait)(FiberCtx*, uint32_t pending_allowed, const Site*);
  void (*fence_proxy_async)(FiberCtx*, const Site*);
  void (*fence_mbarrier_init)(FiberCtx*, const Site*);
  void (*named_barrier)(FiberCtx*, uint32_t id, uint32_t threads, bool wait, const Site*);
  void (*setmaxnreg)(FiberCtx*, const Site*);  // the count is checked at compile time
  void (*mbarrier_init)(FiberCtx*, uint32_t mbar, uint32_t count, const Site*);
  void (*mbarrier_arrive)(FiberCtx*, uint32_t mbar, uint32_t tx_bytes, const Site*);  // arrive.expect_tx
  bool (*mbarrier_try_wait)(FiberCtx*, uint32_t mbar, uint32_t parity, const Site*);
  void (*bulk_copy_g2s)(FiberCtx*, uint32_t smem_dst, const void* src, uint32_t bytes, uint32_t mbar, const Site*);
  // Thread block clusters (sm_90): %cluster_ctarank (0) / %cluster_nctarank (1), barrier.cluster, mapa and
  // ld.shared::cluster.
  uint32_t (*cluster_query)(FiberCtx*, uint32_t which);
  void (*cluster_sync)(FiberCtx*, const Site*);
  uint32_t (*cluster_map)(FiberCtx*, uint32_t smem_addr, uint32_t rank, const Site*);
  void (*cluster_load)(FiberCtx*, uint32_t addr, uint32_t bytes, void* out, const Site*);
};

}  // namespace qt::emu
