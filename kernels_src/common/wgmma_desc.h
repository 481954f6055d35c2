#pragma once
// The wgmma shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format") and the
// shapes wgmma.mma_async accepts: one definition for the GPU half of qt_cuda.h, its emulator half and the
// executor that decodes descriptors (device/emu). Facts and sources: kernels_src/common/README.md, "Hopper".
// Plain C++ with the fixed-width integer types of the includer (<cstdint>, or qt_cuda_gpu.h under NVRTC).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define QT_WGMMA_HD __host__ __device__ __forceinline__
#else
#define QT_WGMMA_HD inline
#endif

namespace qt {

// Layout / swizzle modes (descriptor bits 62-63).
constexpr int kSwizzleNone = 0;
constexpr int kSwizzle128B = 1;
constexpr int kSwizzle64B = 2;
constexpr int kSwizzle32B = 3;

namespace wgmma_desc_field {
// Start address, leading- and stride-dimension byte offsets are stored as (x & 0x3FFFF) >> 4 in 14 bits.
constexpr int kStartShift = 0, kLboShift = 16, kSboShift = 32, kBaseOffsetShift = 49, kSwizzleShift = 62;
constexpr unsigned kFieldMask = 0x3FFF;
constexpr unsigned kAddressMask = 0x3FFFF;
}  // namespace wgmma_desc_field

QT_WGMMA_HD constexpr uint64_t wgmma_desc_encode(uint32_t smem_addr, uint32_t leading_byte_offset,
                                                 uint32_t stride_byte_offset, int swizzle) {
  using namespace wgmma_desc_field;
  return (uint64_t{(smem_addr & kAddressMask) >> 4} << kStartShift) |
         (uint64_t{(leading_byte_offset & kAddressMask) >> 4} << kLboShift) |
         (uint64_t{(stride_byte_offset & kAddressMask) >> 4} << kSboShift) |
         (uint64_t(static_cast<unsigned>(swizzle) & 3u) << kSwizzleShift);
}

// Bytes per row of a swizzle atom (8 rows; the pattern repeats every 8 rows): 16 without swizzling.
QT_WGMMA_HD constexpr uint32_t wgmma_swizzle_row_bytes(int swizzle) {
  return swizzle == kSwizzle128B ? 128u : swizzle == kSwizzle64B ? 64u : swizzle == kSwizzle32B ? 32u : 16u;
}

// m64nNk16 with f16 / bf16 inputs: N is a multiple of 8 from 8 to 256; the accumulator holds N/2 floats per thread.
QT_WGMMA_HD constexpr bool wgmma_valid_n(int n) { return n >= 8 && n <= 256 && n % 8 == 0; }

// setmaxnreg: a register count from 24 to 256, a multiple of 8.
QT_WGMMA_HD constexpr bool setmaxnreg_valid(int regs) { return regs >= 24 && regs <= 256 && regs % 8 == 0; }

}  // namespace qt
