#pragma once
// The host (QT_EMU) side of qt_cuda.h: CUDA built-ins and the PTX wrappers' C++ twins for the fiber emulator
// in runtime/emu. Included only through qt_cuda.h. Kernel modules built with this header are compiled with
// -fsanitize=thread instrumentation whose hooks (defined in the module trailer the emu device appends) route
// shared and global memory accesses to the executor's race / bounds / alignment checks.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "kernels_src/common/emu_abi.h"
#include "kernels_src/common/emu_half.h"
#include "kernels_src/common/emu_ops.h"
#include "kernels_src/common/wgmma_desc.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__ static const
// A plain __shared__ variable cannot be made per block on the host: kernels declare shared memory with
// QT_SHARED / QT_SHARED_ALIGNED / QT_DYNAMIC_SHARED instead (see kernels_src/common/README.md).
#define __shared__ static_assert(false, "declare shared memory with QT_SHARED(name, type) (kernels_src/common/README.md)");

namespace qt::emu {

inline const Api* g_api = nullptr;

__attribute__((always_inline)) inline FiberCtx* ctx() {
  const uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return reinterpret_cast<FiberCtx*>((sp & ~(kFiberRegionBytes - 1)) + kFiberCtxOffset);
}

struct SiteHolder {
  Site site;
  explicit SiteHolder(const std::source_location& l)
      : site{l.file_name(), l.function_name(), static_cast<uint32_t>(l.line()), static_cast<uint32_t>(l.column())} {}
  // The holder is a temporary that lives until the end of the full expression containing the call.
  const Site* ptr() const { return &site; }
};

}  // namespace qt::emu

#define QT_EMU_LOC std::source_location loc = std::source_location::current()
#define QT_EMU_SITE (::qt::emu::SiteHolder(loc).ptr())

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  dim3(const qt::emu::Uint3& u) : x(u.x), y(u.y), z(u.z) {}  // NOLINT
};
typedef qt::emu::Uint3 uint3;

#define threadIdx (::qt::emu::ctx()->thread_idx)
#define blockIdx (::qt::emu::ctx()->block_idx)
#define blockDim (::qt::emu::ctx()->block_dim)
#define gridDim (::qt::emu::ctx()->grid_dim)
constexpr int warpSize = 32;

// Vector types with CUDA's sizes and alignments.
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(4) char4 { signed char x, y, z, w; };
struct alignas(4) uchar4 { unsigned char x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 __half22float2(__half2 h) { return {float(h.x), float(h.y)}; }
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {float(h.x), float(h.y)}; }

// Device math that has no host spelling.
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) { return qt::emu::bit_reverse32(x); }
template <class T>
inline T __ldg(const T* p) { return *p; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
using std::fmaxf;
using std::fminf;

// ---- synchronisation ------------------------------------------------------------------------------
inline void __syncthreads(QT_EMU_LOC) {
  auto* c = qt::emu::ctx();
  qt::emu::g_api->barrier(c, qt::emu::BarrierKind::kPlain, 0, QT_EMU_SITE);
}
inline int __syncthreads_count(int pred, QT_EMU_LOC) {
  return qt::emu::g_api->barrier(qt::emu::ctx(), qt::emu::BarrierKind::kCount, pred, QT_EMU_SITE);
}
inline int __syncthreads_and(int pred, QT_EMU_LOC) {
  return qt::emu::g_api->barrier(qt::emu::ctx(), qt::emu::BarrierKind::kAnd, pred, QT_EMU_SITE);
}
inline int __syncthreads_or(int pred, QT_EMU_LOC) {
  return qt::emu::g_api->barrier(qt::emu::ctx(), qt::emu::BarrierKind::kOr, pred, QT_EMU_SITE);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, QT_EMU_LOC) {
  qt::emu::g_api->syncwarp(qt::emu::ctx(), mask, QT_EMU_SITE);
}
inline void __threadfence() { qt::emu::g_api->fence(qt::emu::ctx()); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- warp shuffles and votes ----------------------------------------------------------------------
namespace qt::emu {
template <class T>
inline T shfl(ShflMode mode, unsigned mask, T var, uint32_t b, uint32_t c, const Site* site) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 2, "shuffle of a 2, 4 or 8 byte value");
  uint64_t v = 0;
  std::memcpy(&v, &var, sizeof(T));
  const uint64_t r = g_api->shfl(ctx(), mode, mask, v, b, c, sizeof(T), site);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
}  // namespace qt::emu

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32, QT_EMU_LOC) {
  return qt::emu::shfl(qt::emu::ShflMode::kIdx, mask, var, static_cast<uint32_t>(src_lane),
                       (static_cast<uint32_t>(32 - width) << 8) | 0x1fu, QT_EMU_SITE);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, QT_EMU_LOC) {
  return qt::emu::shfl(qt::emu::ShflMode::kUp, mask, var, delta, static_cast<uint32_t>(32 - width) << 8,
                       QT_EMU_SITE);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, QT_EMU_LOC) {
  return qt::emu::shfl(qt::emu::ShflMode::kDown, mask, var, delta,
                       (static_cast<uint32_t>(32 - width) << 8) | 0x1fu, QT_EMU_SITE);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, QT_EMU_LOC) {
  return qt::emu::shfl(qt::emu::ShflMode::kBfly, mask, var, static_cast<uint32_t>(lane_mask),
                       (static_cast<uint32_t>(32 - width) << 8) | 0x1fu, QT_EMU_SITE);
}
inline unsigned __ballot_sync(unsigned mask, int pred, QT_EMU_LOC) {
  return qt::emu::g_api->vote(qt::emu::ctx(), qt::emu::VoteKind::kBallot, mask, pred, QT_EMU_SITE);
}
inline int __any_sync(unsigned mask, int pred, QT_EMU_LOC) {
  return static_cast<int>(qt::emu::g_api->vote(qt::emu::ctx(), qt::emu::VoteKind::kAny, mask, pred, QT_EMU_SITE));
}
inline int __all_sync(unsigned mask, int pred, QT_EMU_LOC) {
  return static_cast<int>(qt::emu::g_api->vote(qt::emu::ctx(), qt::emu::VoteKind::kAll, mask, pred, QT_EMU_SITE));
}

// ---- atomics (device-wide: blocks run on several host threads) --------------------------------------
namespace qt::emu {
template <class T>
constexpr AtomicType atomic_type() {
  if constexpr (std::is_same_v<T, int>) return AtomicType::kI32;
  else if constexpr (std::is_same_v<T, unsigned>) return AtomicType::kU32;
  else if constexpr (std::is_same_v<T, unsigned long long>) return AtomicType::kU64;
  else if constexpr (std::is_same_v<T, float>) return AtomicType::kF32;
  else if constexpr (std::is_same_v<T, double>) return AtomicType::kF64;
  else static_assert(sizeof(T) == 0, "atomic on an unsupported type");
}
template <class T>
inline T atomic(AtomicOp op, T* p, T v, T cmp, const Site* site) {
  uint64_t vb = 0, cb = 0;
  std::memcpy(&vb, &v, sizeof(T));
  std::memcpy(&cb, &cmp, sizeof(T));
  const uint64_t r = g_api->atomic(ctx(), op, atomic_type<T>(), p, vb, cb, site);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
}  // namespace qt::emu
#define QT_EMU_ATOMIC(name, op)                                                          \
  template <class T>                                                                     \
  inline T name(T* p, T v, QT_EMU_LOC) {                                                 \
    return qt::emu::atomic(qt::emu::AtomicOp::op, p, v, T{}, QT_EMU_SITE);              \
  }
QT_EMU_ATOMIC(atomicAdd, kAdd)
QT_EMU_ATOMIC(atomicSub, kSub)
QT_EMU_ATOMIC(atomicMin, kMin)
QT_EMU_ATOMIC(atomicMax, kMax)
QT_EMU_ATOMIC(atomicExch, kExch)
QT_EMU_ATOMIC(atomicAnd, kAnd)
QT_EMU_ATOMIC(atomicOr, kOr)
QT_EMU_ATOMIC(atomicXor, kXor)
#undef QT_EMU_ATOMIC
template <class T>
inline T atomicCAS(T* p, T compare, T v, QT_EMU_LOC) {
  return qt::emu::atomic(qt::emu::AtomicOp::kCas, p, v, compare, QT_EMU_SITE);
}

// ---- shared memory ----------------------------------------------------------------------------------
template <class T>
using qt_type_t = T;
#define QT_SHARED_ALIGNED(name, align, ...)                                                            \
  static const char qt_shared_tag_##name = 0;                                                          \
  qt_type_t<__VA_ARGS__>& name = *static_cast<qt_type_t<__VA_ARGS__>*>(::qt::emu::g_api->static_shared( \
      ::qt::emu::ctx(), &qt_shared_tag_##name, sizeof(qt_type_t<__VA_ARGS__>), (align),                 \
      ::qt::emu::SiteHolder(std::source_location::current()).ptr()))
#define QT_SHARED(name, ...) QT_SHARED_ALIGNED(name, alignof(qt_type_t<__VA_ARGS__>), __VA_ARGS__)
#define QT_DYNAMIC_SHARED(name, ...) \
  qt_type_t<__VA_ARGS__>* const name = static_cast<qt_type_t<__VA_ARGS__>*>(::qt::emu::g_api->dynamic_shared(::qt::emu::ctx()))

inline size_t __cvta_generic_to_shared(const void* p, QT_EMU_LOC) {
  return qt::emu::g_api->cvta_shared(qt::emu::ctx(), p, QT_EMU_SITE);
}

// ---- PTX wrappers -----------------------------------------------------------------------------------
namespace qt {

template <int kLut>
__forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  static_assert(kLut >= 0 && kLut < 256, "lop3 LUT is 8 bits");
  return emu::lop3_ref(a, b, c, static_cast<uint32_t>(kLut));
}
__forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) { return emu::prmt_ref(a, b, selector); }

__forceinline__ uint32_t smem_u32(const void* p, QT_EMU_LOC) {
  return emu::g_api->cvta_shared(emu::ctx(), p, QT_EMU_SITE);
}

__forceinline__ void ldmatrix_x1(uint32_t* r, uint32_t smem_addr, QT_EMU_LOC) {
  emu::g_api->ldmatrix(emu::ctx(), 1, false, smem_addr, r, QT_EMU_SITE);
}
__forceinline__ void ldmatrix_x2(uint32_t* r, uint32_t smem_addr, QT_EMU_LOC) {
  emu::g_api->ldmatrix(emu::ctx(), 2, false, smem_addr, r, QT_EMU_SITE);
}
__forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t smem_addr, QT_EMU_LOC) {
  emu::g_api->ldmatrix(emu::ctx(), 4, false, smem_addr, r, QT_EMU_SITE);
}
__forceinline__ void ldmatrix_x1_trans(uint32_t* r, uint32_t smem_addr, QT_EMU_LOC) {
  emu::g_api->ldmatrix(emu::ctx(), 1, true, smem_addr, r, QT_EMU_SITE);
}
__forceinline__ void ldmatrix_x2_trans(uint32_t* r, uint32_t smem_addr, QT_EMU_LOC) {
  emu::g_api->ldmatrix(emu::ctx(), 2, true, smem_addr, r, QT_EMU_SITE);
}
__forceinline__ void ldmatrix_x4_trans(uint32_t* r, uint32_t smem_addr, QT_EMU_LOC) {
  emu::g_api->ldmatrix(emu::ctx(), 4, true, smem_addr, r, QT_EMU_SITE);
}

__forceinline__ void mma_m16n8k16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c,
                                      QT_EMU_LOC) {
  emu::g_api->mma(emu::ctx(), emu::MmaKind::kF16F32, d, a, b, c, QT_EMU_SITE);
}
__forceinline__ void mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c,
                                       QT_EMU_LOC) {
  emu::g_api->mma(emu::ctx(), emu::MmaKind::kBf16F32, d, a, b, c, QT_EMU_SITE);
}

// The executor's mma entry carries fp32 operands; for kS8S32 its C and D slots hold the int32 bits.
__forceinline__ void mma_m16n8k32_s8(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c,
                                     QT_EMU_LOC) {
  float cf[4], df[4];
  std::memcpy(cf, c, sizeof(cf));
  emu::g_api->mma(emu::ctx(), emu::MmaKind::kS8S32, df, a, b, cf, QT_EMU_SITE);
  std::memcpy(d, df, sizeof(df));
}

template <int kBytes>
__forceinline__ void cp_async_ca(uint32_t smem_addr, const void* gmem, uint32_t src_bytes = kBytes, QT_EMU_LOC) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  emu::g_api->cp_async(emu::ctx(), smem_addr, gmem, kBytes, src_bytes, QT_EMU_SITE);
}
__forceinline__ void cp_async_cg16(uint32_t smem_addr, const void* gmem, uint32_t src_bytes = 16, QT_EMU_LOC) {
  emu::g_api->cp_async(emu::ctx(), smem_addr, gmem, 16, src_bytes, QT_EMU_SITE);
}
// The cache policy has no effect on the emulated memory.
__forceinline__ void cp_async_cg16_hint(uint32_t smem_addr, const void* gmem, uint64_t /*policy*/, QT_EMU_LOC) {
  emu::g_api->cp_async(emu::ctx(), smem_addr, gmem, 16, 16, QT_EMU_SITE);
}
__forceinline__ void cp_async_commit() { emu::g_api->cp_async_commit(emu::ctx()); }
template <int kPending>
__forceinline__ void cp_async_wait(QT_EMU_LOC) {
  emu::g_api->cp_async_wait(emu::ctx(), kPending, QT_EMU_SITE);
}
__forceinline__ void cp_async_wait_all(QT_EMU_LOC) {
  emu::g_api->cp_async_commit(emu::ctx());
  emu::g_api->cp_async_wait(emu::ctx(), 0, QT_EMU_SITE);
}

// Cache hints have no effect on the emulated memory: the policy is a dummy and the load a plain 16-byte read
// (checked for bounds, alignment and races like any other).
__forceinline__ uint64_t policy_evict_first() { return 0; }
__forceinline__ uint4 ldg_stream_u4(const void* gmem, uint64_t /*policy*/) { return *static_cast<const uint4*>(gmem); }

__forceinline__ uint32_t add_f16x2(uint32_t a, uint32_t b) { return emu::f16x2_add(a, b); }
__forceinline__ uint32_t sub_f16x2(uint32_t a, uint32_t b) { return emu::f16x2_sub(a, b); }
__forceinline__ uint32_t mul_f16x2(uint32_t a, uint32_t b) { return emu::f16x2_mul(a, b); }
__forceinline__ uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) { return emu::f16x2_fma(a, b, c); }
__forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) { return emu::bf16x2_fma(a, b, c); }
__forceinline__ uint32_t cvt_f16x2(float lo, float hi) { return emu::pack_f16x2(lo, hi); }
__forceinline__ uint32_t cvt_bf16x2(float lo, float hi) { return emu::pack_bf16x2(lo, hi); }

// ---- Hopper (sm_90a) --------------------------------------------------------------------------------------
// The executor emulates these asynchronously and checks their rules (kernels_src/common/README.md, "Hopper").
__forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t leading_byte_offset, uint32_t stride_byte_offset,
                                    int swizzle, QT_EMU_LOC) {
  emu::g_api->check_wgmma_desc(emu::ctx(), smem_addr, leading_byte_offset, stride_byte_offset, swizzle, QT_EMU_SITE);
  return emu::emu_wgmma_desc(smem_addr, leading_byte_offset, stride_byte_offset, swizzle);
}

namespace emu {
template <int N>
__forceinline__ void wgmma(float* d, const uint32_t* a, uint64_t desc_a, uint64_t desc_b, bool bf16, int trans_a,
                           int trans_b, int scale_d, const Site* site) {
  static_assert(QT_ARCH >= 90 && wgmma_valid_n(N), "wgmma: sm_90a (QT_ARCH 90), N in 8..256 step 8");
  const WgmmaCall call{d,
                       a,
                       desc_a,
                       desc_b,
                       static_cast<uint32_t>(N),
                       static_cast<uint8_t>(bf16),
                       static_cast<uint8_t>(trans_a),
                       static_cast<uint8_t>(trans_b),
                       static_cast<uint8_t>(scale_d != 0)};
  g_api->wgmma(ctx(), &call, site);
}
}  // namespace emu

template <int N, int kTransA, int kTransB>
__forceinline__ void wgmma_m64k16_f16_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d, QT_EMU_LOC) {
  static_assert((kTransA | kTransB) >> 1 == 0, "wgmma: transposes 0/1");
  emu::wgmma<N>(d, nullptr, desc_a, desc_b, false, kTransA, kTransB, scale_d, QT_EMU_SITE);
}
template <int N, int kTransA, int kTransB>
__forceinline__ void wgmma_m64k16_bf16_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d, QT_EMU_LOC) {
  static_assert((kTransA | kTransB) >> 1 == 0, "wgmma: transposes 0/1");
  emu::wgmma<N>(d, nullptr, desc_a, desc_b, true, kTransA, kTransB, scale_d, QT_EMU_SITE);
}
template <int N, int kTransB>
__forceinline__ void wgmma_m64k16_f16_rs(float* d, const uint32_t* a, uint64_t desc_b, int scale_d, QT_EMU_LOC) {
  static_assert(kTransB >> 1 == 0, "wgmma: transpose 0/1");
  emu::wgmma<N>(d, a, 0, desc_b, false, 0, kTransB, scale_d, QT_EMU_SITE);
}
template <int N, int kTransB>
__forceinline__ void wgmma_m64k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b, int scale_d, QT_EMU_LOC) {
  static_assert(kTransB >> 1 == 0, "wgmma: transpose 0/1");
  emu::wgmma<N>(d, a, 0, desc_b, true, 0, kTransB, scale_d, QT_EMU_SITE);
}

// The registers live in memory here, so the compiler cannot move their accesses past the emulated wgmma
// calls: nothing to pin (and nothing may touch them, or the executor would see an access).
template <int kCount>
__forceinline__ void wgmma_fence_operand(float*) {}
template <int kCount>
__forceinline__ void wgmma_fence_operand(uint32_t*) {}

__forceinline__ void wgmma_fence(QT_EMU_LOC) { emu::g_api->wgmma_fence(emu::ctx(), QT_EMU_SITE); }
__forceinline__ void wgmma_commit_group(QT_EMU_LOC) { emu::g_api->wgmma_commit(emu::ctx(), QT_EMU_SITE); }
template <int kPending>
__forceinline__ void wgmma_wait_group(QT_EMU_LOC) {
  static_assert(kPending >= 0, "wgmma_wait_group: a count of groups left in flight");
  emu::g_api->wgmma_wait(emu::ctx(), kPending, QT_EMU_SITE);
}

__forceinline__ void fence_proxy_async_shared(QT_EMU_LOC) { emu::g_api->fence_proxy_async(emu::ctx(), QT_EMU_SITE); }

__forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads, QT_EMU_LOC) {
  emu::g_api->named_barrier(emu::ctx(), id, threads, true, QT_EMU_SITE);
}
__forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads, QT_EMU_LOC) {
  emu::g_api->named_barrier(emu::ctx(), id, threads, false, QT_EMU_SITE);
}

template <int kRegs>
__forceinline__ void setmaxnreg_inc(QT_EMU_LOC) {
  static_assert(QT_ARCH >= 90 && setmaxnreg_valid(kRegs), "setmaxnreg: sm_90a, 24..256 registers, a multiple of 8");
  emu::g_api->setmaxnreg(emu::ctx(), QT_EMU_SITE);
}
template <int kRegs>
__forceinline__ void setmaxnreg_dec(QT_EMU_LOC) {
  static_assert(QT_ARCH >= 90 && setmaxnreg_valid(kRegs), "setmaxnreg: sm_90a, 24..256 registers, a multiple of 8");
  emu::g_api->setmaxnreg(emu::ctx(), QT_EMU_SITE);
}

__forceinline__ void mbarrier_init(uint32_t mbar, uint32_t count, QT_EMU_LOC) {
  emu::g_api->mbarrier_init(emu::ctx(), mbar, count, QT_EMU_SITE);
}
__forceinline__ void fence_mbarrier_init(QT_EMU_LOC) { emu::g_api->fence_mbarrier_init(emu::ctx(), QT_EMU_SITE); }
__forceinline__ void mbarrier_arrive(uint32_t mbar, QT_EMU_LOC) {
  emu::g_api->mbarrier_arrive(emu::ctx(), mbar, 0, QT_EMU_SITE);
}
__forceinline__ void mbarrier_arrive_expect_tx(uint32_t mbar, uint32_t bytes, QT_EMU_LOC) {
  emu::g_api->mbarrier_arrive(emu::ctx(), mbar, bytes, QT_EMU_SITE);
}
// The executor parks the thread until the phase completes (a phase that never completes ends in the
// deadlock report), so the wait succeeds on its first try.
__forceinline__ bool mbarrier_try_wait_parity(uint32_t mbar, uint32_t parity, QT_EMU_LOC) {
  return emu::g_api->mbarrier_try_wait(emu::ctx(), mbar, parity, QT_EMU_SITE);
}
__forceinline__ void mbarrier_wait_parity(uint32_t mbar, uint32_t parity, QT_EMU_LOC) {
  emu::g_api->mbarrier_try_wait(emu::ctx(), mbar, parity, QT_EMU_SITE);
}

__forceinline__ void cp_async_bulk_g2s(uint32_t smem_dst, const void* gmem_src, uint32_t bytes, uint32_t mbar,
                                       QT_EMU_LOC) {
  emu::g_api->bulk_copy_g2s(emu::ctx(), smem_dst, gmem_src, bytes, mbar, QT_EMU_SITE);
}

// Thread block clusters (sm_90): the executor runs a cluster's CTAs together (device/emu/cluster.h).
__forceinline__ uint32_t cluster_ctarank() { return emu::g_api->cluster_query(emu::ctx(), 0); }
__forceinline__ uint32_t cluster_nctarank() { return emu::g_api->cluster_query(emu::ctx(), 1); }
__forceinline__ void cluster_sync(QT_EMU_LOC) { emu::g_api->cluster_sync(emu::ctx(), QT_EMU_SITE); }
__forceinline__ uint32_t map_shared_rank(uint32_t smem_addr, uint32_t rank, QT_EMU_LOC) {
  return emu::g_api->cluster_map(emu::ctx(), smem_addr, rank, QT_EMU_SITE);
}
__forceinline__ float4 ld_shared_cluster_f32x4(uint32_t cluster_addr, QT_EMU_LOC) {
  float4 v;
  emu::g_api->cluster_load(emu::ctx(), cluster_addr, 16, &v, QT_EMU_SITE);
  return v;
}

[[noreturn]] __forceinline__ void trap(const char* message, QT_EMU_LOC) {
  emu::g_api->trap(emu::ctx(), message, QT_EMU_SITE);
  __builtin_unreachable();
}

// The emulator runs one launch at a time: the previous grid is always finished (qt_cuda_gpu.h says why kernels
// call this first).
__forceinline__ void grid_dependency_entry() {}

}  // namespace qt
