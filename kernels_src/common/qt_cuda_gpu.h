#pragma once
// The GPU (NVRTC / nvcc) side of qt_cuda.h: PTX wrappers as inline asm. Included only through qt_cuda.h.
// Needs the CUDA include directory on the NVRTC include path (cuda_fp16.h, cuda_bf16.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#if defined(__CUDACC_RTC__)
// NVRTC has no <cstdint>.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
typedef unsigned long size_t;
#else
#include <cstdint>
#endif

#include "kernels_src/common/wgmma_desc.h"

template <class T>
using qt_type_t = T;
#define QT_SHARED_ALIGNED(name, align, ...) __shared__ __align__(align) qt_type_t<__VA_ARGS__> name
#define QT_SHARED(name, ...) __shared__ qt_type_t<__VA_ARGS__> name
#define QT_DYNAMIC_SHARED(name, ...) extern __shared__ __align__(16) qt_type_t<__VA_ARGS__> name[]

namespace qt {

template <int kLut>
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  static_assert(kLut >= 0 && kLut < 256, "lop3 LUT is 8 bits");
  uint32_t d;
  asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(kLut));
  return d;
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm volatile("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The "memory" clobbers keep the compiler from moving ordinary shared-memory loads above the wait (the copied
// bytes become visible to this thread only there) and ordinary stores below an ldmatrix that reads them: the
// asm operands carry only 32-bit shared addresses, so the compiler cannot see these accesses otherwise.
__device__ __forceinline__ void ldmatrix_x1(uint32_t* r, uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t* r, uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t* r, uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t* r, uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}

__device__ __forceinline__ void mma_m16n8k16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
__device__ __forceinline__ void mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

// Integer tensor-core MMA (s8 x s8 -> s32, no .satfinite: the s32 accumulation wraps like the emulator's).
__device__ __forceinline__ void mma_m16n8k32_s8(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]),
        "r"(c[3]));
}

template <int kBytes>
__device__ __forceinline__ void cp_async_ca(uint32_t smem_addr, const void* gmem, uint32_t src_bytes = kBytes) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr), "l"(gmem), "n"(kBytes),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_cg16(uint32_t smem_addr, const void* gmem, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// cp.async.cg with an L2 cache policy (policy_evict_first below): weights streamed once through shared memory.
__device__ __forceinline__ void cp_async_cg16_hint(uint32_t smem_addr, const void* gmem, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
               "l"(policy)
               : "memory");
}
// A cache policy that marks lines evict-first in L2 (createpolicy), and a 16-byte read-only global load with
// it that does not allocate in L1: for data streamed once (quantized weights), so it neither evicts the
// activations and scales that are reused nor pollutes L1.
__device__ __forceinline__ uint64_t policy_evict_first() {
  uint64_t p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint4 ldg_stream_u4(const void* gmem, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(gmem), "l"(policy));
  return v;
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ uint32_t add_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("add.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t sub_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t mul_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm volatile("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm volatile("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm volatile("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
// cvt.rn.f16x2.f32 d, a, b puts cvt(a) in the upper half: pass (hi, lo).
__device__ __forceinline__ uint32_t cvt_f16x2(float lo, float hi) {
  uint32_t d;
  asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ uint32_t cvt_bf16x2(float lo, float hi) {
  uint32_t d;
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

__device__ __forceinline__ void trap(const char* /*message*/) { __trap(); }

}  // namespace qt

// ---- Hopper (sm_90a): wgmma, mbarrier, bulk copies, named barriers ----------------------------------------
// wgmma.mma_async binds its N/2 accumulator registers as "+f" operands %0..%(N/2-1); its other operands
// follow, so their numbers depend on N. The tables below spell the operand text and bindings for every N
// (generated, 4 registers at a time) and, per N, the numbers of the operands after the accumulators.
#define QT_WGMMA_S4(a, b, c, e) ", %" #a ", %" #b ", %" #c ", %" #e
#define QT_WGMMA_O4(a, b, c, e) , "+f"(d[a]), "+f"(d[b]), "+f"(d[c]), "+f"(d[e])
#define QT_WGMMA_ACC_S4 "%0, %1, %2, %3"
#define QT_WGMMA_ACC_S8 QT_WGMMA_ACC_S4 QT_WGMMA_S4(4, 5, 6, 7)
#define QT_WGMMA_ACC_S12 QT_WGMMA_ACC_S8 QT_WGMMA_S4(8, 9, 10, 11)
#define QT_WGMMA_ACC_S16 QT_WGMMA_ACC_S12 QT_WGMMA_S4(12, 13, 14, 15)
#define QT_WGMMA_ACC_S20 QT_WGMMA_ACC_S16 QT_WGMMA_S4(16, 17, 18, 19)
#define QT_WGMMA_ACC_S24 QT_WGMMA_ACC_S20 QT_WGMMA_S4(20, 21, 22, 23)
#define QT_WGMMA_ACC_S28 QT_WGMMA_ACC_S24 QT_WGMMA_S4(24, 25, 26, 27)
#define QT_WGMMA_ACC_S32 QT_WGMMA_ACC_S28 QT_WGMMA_S4(28, 29, 30, 31)
#define QT_WGMMA_ACC_S36 QT_WGMMA_ACC_S32 QT_WGMMA_S4(32, 33, 34, 35)
#define QT_WGMMA_ACC_S40 QT_WGMMA_ACC_S36 QT_WGMMA_S4(36, 37, 38, 39)
#define QT_WGMMA_ACC_S44 QT_WGMMA_ACC_S40 QT_WGMMA_S4(40, 41, 42, 43)
#define QT_WGMMA_ACC_S48 QT_WGMMA_ACC_S44 QT_WGMMA_S4(44, 45, 46, 47)
#define QT_WGMMA_ACC_S52 QT_WGMMA_ACC_S48 QT_WGMMA_S4(48, 49, 50, 51)
#define QT_WGMMA_ACC_S56 QT_WGMMA_ACC_S52 QT_WGMMA_S4(52, 53, 54, 55)
#define QT_WGMMA_ACC_S60 QT_WGMMA_ACC_S56 QT_WGMMA_S4(56, 57, 58, 59)
#define QT_WGMMA_ACC_S64 QT_WGMMA_ACC_S60 QT_WGMMA_S4(60, 61, 62, 63)
#define QT_WGMMA_ACC_S68 QT_WGMMA_ACC_S64 QT_WGMMA_S4(64, 65, 66, 67)
#define QT_WGMMA_ACC_S72 QT_WGMMA_ACC_S68 QT_WGMMA_S4(68, 69, 70, 71)
#define QT_WGMMA_ACC_S76 QT_WGMMA_ACC_S72 QT_WGMMA_S4(72, 73, 74, 75)
#define QT_WGMMA_ACC_S80 QT_WGMMA_ACC_S76 QT_WGMMA_S4(76, 77, 78, 79)
#define QT_WGMMA_ACC_S84 QT_WGMMA_ACC_S80 QT_WGMMA_S4(80, 81, 82, 83)
#define QT_WGMMA_ACC_S88 QT_WGMMA_ACC_S84 QT_WGMMA_S4(84, 85, 86, 87)
#define QT_WGMMA_ACC_S92 QT_WGMMA_ACC_S88 QT_WGMMA_S4(88, 89, 90, 91)
#define QT_WGMMA_ACC_S96 QT_WGMMA_ACC_S92 QT_WGMMA_S4(92, 93, 94, 95)
#define QT_WGMMA_ACC_S100 QT_WGMMA_ACC_S96 QT_WGMMA_S4(96, 97, 98, 99)
#define QT_WGMMA_ACC_S104 QT_WGMMA_ACC_S100 QT_WGMMA_S4(100, 101, 102, 103)
#define QT_WGMMA_ACC_S108 QT_WGMMA_ACC_S104 QT_WGMMA_S4(104, 105, 106, 107)
#define QT_WGMMA_ACC_S112 QT_WGMMA_ACC_S108 QT_WGMMA_S4(108, 109, 110, 111)
#define QT_WGMMA_ACC_S116 QT_WGMMA_ACC_S112 QT_WGMMA_S4(112, 113, 114, 115)
#define QT_WGMMA_ACC_S120 QT_WGMMA_ACC_S116 QT_WGMMA_S4(116, 117, 118, 119)
#define QT_WGMMA_ACC_S124 QT_WGMMA_ACC_S120 QT_WGMMA_S4(120, 121, 122, 123)
#define QT_WGMMA_ACC_S128 QT_WGMMA_ACC_S124 QT_WGMMA_S4(124, 125, 126, 127)
#define QT_WGMMA_ACC_O4 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define QT_WGMMA_ACC_O8 QT_WGMMA_ACC_O4 QT_WGMMA_O4(4, 5, 6, 7)
#define QT_WGMMA_ACC_O12 QT_WGMMA_ACC_O8 QT_WGMMA_O4(8, 9, 10, 11)
#define QT_WGMMA_ACC_O16 QT_WGMMA_ACC_O12 QT_WGMMA_O4(12, 13, 14, 15)
#define QT_WGMMA_ACC_O20 QT_WGMMA_ACC_O16 QT_WGMMA_O4(16, 17, 18, 19)
#define QT_WGMMA_ACC_O24 QT_WGMMA_ACC_O20 QT_WGMMA_O4(20, 21, 22, 23)
#define QT_WGMMA_ACC_O28 QT_WGMMA_ACC_O24 QT_WGMMA_O4(24, 25, 26, 27)
#define QT_WGMMA_ACC_O32 QT_WGMMA_ACC_O28 QT_WGMMA_O4(28, 29, 30, 31)
#define QT_WGMMA_ACC_O36 QT_WGMMA_ACC_O32 QT_WGMMA_O4(32, 33, 34, 35)
#define QT_WGMMA_ACC_O40 QT_WGMMA_ACC_O36 QT_WGMMA_O4(36, 37, 38, 39)
#define QT_WGMMA_ACC_O44 QT_WGMMA_ACC_O40 QT_WGMMA_O4(40, 41, 42, 43)
#define QT_WGMMA_ACC_O48 QT_WGMMA_ACC_O44 QT_WGMMA_O4(44, 45, 46, 47)
#define QT_WGMMA_ACC_O52 QT_WGMMA_ACC_O48 QT_WGMMA_O4(48, 49, 50, 51)
#define QT_WGMMA_ACC_O56 QT_WGMMA_ACC_O52 QT_WGMMA_O4(52, 53, 54, 55)
#define QT_WGMMA_ACC_O60 QT_WGMMA_ACC_O56 QT_WGMMA_O4(56, 57, 58, 59)
#define QT_WGMMA_ACC_O64 QT_WGMMA_ACC_O60 QT_WGMMA_O4(60, 61, 62, 63)
#define QT_WGMMA_ACC_O68 QT_WGMMA_ACC_O64 QT_WGMMA_O4(64, 65, 66, 67)
#define QT_WGMMA_ACC_O72 QT_WGMMA_ACC_O68 QT_WGMMA_O4(68, 69, 70, 71)
#define QT_WGMMA_ACC_O76 QT_WGMMA_ACC_O72 QT_WGMMA_O4(72, 73, 74, 75)
#define QT_WGMMA_ACC_O80 QT_WGMMA_ACC_O76 QT_WGMMA_O4(76, 77, 78, 79)
#define QT_WGMMA_ACC_O84 QT_WGMMA_ACC_O80 QT_WGMMA_O4(80, 81, 82, 83)
#define QT_WGMMA_ACC_O88 QT_WGMMA_ACC_O84 QT_WGMMA_O4(84, 85, 86, 87)
#define QT_WGMMA_ACC_O92 QT_WGMMA_ACC_O88 QT_WGMMA_O4(88, 89, 90, 91)
#define QT_WGMMA_ACC_O96 QT_WGMMA_ACC_O92 QT_WGMMA_O4(92, 93, 94, 95)
#define QT_WGMMA_ACC_O100 QT_WGMMA_ACC_O96 QT_WGMMA_O4(96, 97, 98, 99)
#define QT_WGMMA_ACC_O104 QT_WGMMA_ACC_O100 QT_WGMMA_O4(100, 101, 102, 103)
#define QT_WGMMA_ACC_O108 QT_WGMMA_ACC_O104 QT_WGMMA_O4(104, 105, 106, 107)
#define QT_WGMMA_ACC_O112 QT_WGMMA_ACC_O108 QT_WGMMA_O4(108, 109, 110, 111)
#define QT_WGMMA_ACC_O116 QT_WGMMA_ACC_O112 QT_WGMMA_O4(112, 113, 114, 115)
#define QT_WGMMA_ACC_O120 QT_WGMMA_ACC_O116 QT_WGMMA_O4(116, 117, 118, 119)
#define QT_WGMMA_ACC_O124 QT_WGMMA_ACC_O120 QT_WGMMA_O4(120, 121, 122, 123)
#define QT_WGMMA_ACC_O128 QT_WGMMA_ACC_O124 QT_WGMMA_O4(124, 125, 126, 127)
// X(N, N/2, then the seven operand numbers after the accumulators)
#define QT_WGMMA_SHAPES(X) \
  X(8, 4, 4, 5, 6, 7, 8, 9, 10) \
  X(16, 8, 8, 9, 10, 11, 12, 13, 14) \
  X(24, 12, 12, 13, 14, 15, 16, 17, 18) \
  X(32, 16, 16, 17, 18, 19, 20, 21, 22) \
  X(40, 20, 20, 21, 22, 23, 24, 25, 26) \
  X(48, 24, 24, 25, 26, 27, 28, 29, 30) \
  X(56, 28, 28, 29, 30, 31, 32, 33, 34) \
  X(64, 32, 32, 33, 34, 35, 36, 37, 38) \
  X(72, 36, 36, 37, 38, 39, 40, 41, 42) \
  X(80, 40, 40, 41, 42, 43, 44, 45, 46) \
  X(88, 44, 44, 45, 46, 47, 48, 49, 50) \
  X(96, 48, 48, 49, 50, 51, 52, 53, 54) \
  X(104, 52, 52, 53, 54, 55, 56, 57, 58) \
  X(112, 56, 56, 57, 58, 59, 60, 61, 62) \
  X(120, 60, 60, 61, 62, 63, 64, 65, 66) \
  X(128, 64, 64, 65, 66, 67, 68, 69, 70) \
  X(136, 68, 68, 69, 70, 71, 72, 73, 74) \
  X(144, 72, 72, 73, 74, 75, 76, 77, 78) \
  X(152, 76, 76, 77, 78, 79, 80, 81, 82) \
  X(160, 80, 80, 81, 82, 83, 84, 85, 86) \
  X(168, 84, 84, 85, 86, 87, 88, 89, 90) \
  X(176, 88, 88, 89, 90, 91, 92, 93, 94) \
  X(184, 92, 92, 93, 94, 95, 96, 97, 98) \
  X(192, 96, 96, 97, 98, 99, 100, 101, 102) \
  X(200, 100, 100, 101, 102, 103, 104, 105, 106) \
  X(208, 104, 104, 105, 106, 107, 108, 109, 110) \
  X(216, 108, 108, 109, 110, 111, 112, 113, 114) \
  X(224, 112, 112, 113, 114, 115, 116, 117, 118) \
  X(232, 116, 116, 117, 118, 119, 120, 121, 122) \
  X(240, 120, 120, 121, 122, 123, 124, 125, 126) \
  X(248, 124, 124, 125, 126, 127, 128, 129, 130) \
  X(256, 128, 128, 129, 130, 131, 132, 133, 134)

// scale-d is a predicate: D = A*B + (scale_d ? D : 0). imm-scale-a/b = 1 (no negation).
#define QT_WGMMA_SS_ASM(N, R, TYPE, I0, I1, I2, I3, I4)                                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #I2 ", 0;\n"                                          \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" QT_WGMMA_ACC_S##R      \
               "}, %" #I0 ", %" #I1 ", p, 1, 1, %" #I3 ", %" #I4 ";\n}\n"                                  \
               : QT_WGMMA_ACC_O##R                                                                        \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB))
#define QT_WGMMA_RS_ASM(N, R, TYPE, I0, I1, I2, I3, I4, I5, I6)                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #I5 ", 0;\n"                                          \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" QT_WGMMA_ACC_S##R      \
               "}, {%" #I0 ", %" #I1 ", %" #I2 ", %" #I3 "}, %" #I4 ", p, 1, 1, %" #I6 ";\n}\n"            \
               : QT_WGMMA_ACC_O##R                                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB))

namespace qt {
namespace detail {
template <int N>
struct Wgmma;
#define QT_WGMMA_DEFINE(N, R, I0, I1, I2, I3, I4, I5, I6)                                                  \
  template <>                                                                                            \
  struct Wgmma<N> {                                                                                      \
    template <int kTransA, int kTransB>                                                                  \
    static __device__ __forceinline__ void ss_f16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      QT_WGMMA_SS_ASM(N, R, "f16", I0, I1, I2, I3, I4);                                                  \
    }                                                                                                    \
    template <int kTransA, int kTransB>                                                                  \
    static __device__ __forceinline__ void ss_bf16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      QT_WGMMA_SS_ASM(N, R, "bf16", I0, I1, I2, I3, I4);                                                 \
    }                                                                                                    \
    template <int kTransB>                                                                               \
    static __device__ __forceinline__ void rs_f16(float* d, const uint32_t* a, uint64_t desc_b, int scale_d) { \
      QT_WGMMA_RS_ASM(N, R, "f16", I0, I1, I2, I3, I4, I5, I6);                                          \
    }                                                                                                    \
    template <int kTransB>                                                                               \
    static __device__ __forceinline__ void rs_bf16(float* d, const uint32_t* a, uint64_t desc_b, int scale_d) { \
      QT_WGMMA_RS_ASM(N, R, "bf16", I0, I1, I2, I3, I4, I5, I6);                                         \
    }                                                                                                    \
  };
QT_WGMMA_SHAPES(QT_WGMMA_DEFINE)
#undef QT_WGMMA_DEFINE
}  // namespace detail

__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t leading_byte_offset,
                                               uint32_t stride_byte_offset, int swizzle) {
  return wgmma_desc_encode(smem_addr, leading_byte_offset, stride_byte_offset, swizzle);
}

// D(64xN, f32) = A(64x16) * B(16xN) + (scale_d ? D : 0), issued asynchronously by the warpgroup.
template <int N, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64k16_f16_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(wgmma_valid_n(N) && (kTransA | kTransB) >> 1 == 0, "wgmma: N in 8..256 step 8, transposes 0/1");
  detail::Wgmma<N>::template ss_f16<kTransA, kTransB>(d, desc_a, desc_b, scale_d);
}
template <int N, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64k16_bf16_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(wgmma_valid_n(N) && (kTransA | kTransB) >> 1 == 0, "wgmma: N in 8..256 step 8, transposes 0/1");
  detail::Wgmma<N>::template ss_bf16<kTransA, kTransB>(d, desc_a, desc_b, scale_d);
}
template <int N, int kTransB>
__device__ __forceinline__ void wgmma_m64k16_f16_rs(float* d, const uint32_t* a, uint64_t desc_b, int scale_d) {
  static_assert(wgmma_valid_n(N) && kTransB >> 1 == 0, "wgmma: N in 8..256 step 8, transpose 0/1");
  detail::Wgmma<N>::template rs_f16<kTransB>(d, a, desc_b, scale_d);
}
template <int N, int kTransB>
__device__ __forceinline__ void wgmma_m64k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b, int scale_d) {
  static_assert(wgmma_valid_n(N) && kTransB >> 1 == 0, "wgmma: N in 8..256 step 8, transpose 0/1");
  detail::Wgmma<N>::template rs_bf16<kTransB>(d, a, desc_b, scale_d);
}

// The compiler sees no dependency between a wgmma's registers and wgmma_fence / wgmma_wait_group: these
// empty asm statements pin the registers there (before wgmma_fence, after wgmma_wait_group).
template <int kCount>
__device__ __forceinline__ void wgmma_fence_operand(float* r) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int kCount>
__device__ __forceinline__ void wgmma_fence_operand(uint32_t* r) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kPending >= 0, "wgmma_wait_group: a count of groups left in flight");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(setmaxnreg_valid(kRegs), "setmaxnreg: 24..256 registers, a multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(setmaxnreg_valid(kRegs), "setmaxnreg: 24..256 registers, a multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

__device__ __forceinline__ void mbarrier_init(uint32_t mbar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(mbar), "r"(count) : "memory");
}
// Makes this thread's mbarrier_init visible to the async proxy (the bulk copies' complete_tx).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t mbar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(mbar) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t mbar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(mbar),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint32_t mbar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(mbar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_parity(uint32_t mbar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(mbar, parity)) {
  }
}

// 1-D bulk copy global -> shared by the TMA engine; its bytes complete_tx on `mbar`.
__device__ __forceinline__ void cp_async_bulk_g2s(uint32_t smem_dst, const void* gmem_src, uint32_t bytes,
                                                  uint32_t mbar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               :
               : "r"(smem_dst), "l"(gmem_src), "r"(bytes), "r"(mbar)
               : "memory");
}

// Thread block clusters (sm_90). A launch without a cluster attribute is a cluster of one CTA.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// Every thread of the cluster: its shared-memory writes before are visible to every CTA's reads after, and no
// CTA goes on (or exits, freeing its shared memory) until all have arrived.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The shared::cluster address of this CTA's shared address `smem_addr` in the CTA of rank `rank`.
__device__ __forceinline__ uint32_t map_shared_rank(uint32_t smem_addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr), "r"(rank));
  return r;
}
__device__ __forceinline__ float4 ld_shared_cluster_f32x4(uint32_t cluster_addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_addr)
               : "memory");
  return v;
}

// Programmatic dependent launch (sm_90+): every kernel's first statement. The wait returns once the grid this
// launch depends on has finished and its writes are visible (at once when the launch was made without
// programmatic serialization); the trigger then lets the next kernel of the stream be scheduled onto the SMs
// while this one runs, so its launch latency is spent before this grid ends rather than after. Waiting first
// keeps a single kernel of lookahead: no chain of waiting grids takes SM slots. Below sm_90 neither exists.
// A kernel may put work before it, in a region that opens with the line "// PDL: before the wait"
// (tests/gpu_backend/test_kernel_entry.cpp holds every kernel to one of the two forms), reading only what no
// kernel of a step writes (the kernels before it may still run): the stream GEMVs issue their first weight
// tiles there, weights being written once at load, which ends in a device synchronize.
__device__ __forceinline__ void grid_dependency_entry() {
#if QT_ARCH >= 90
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace qt
