#pragma once
// The one header every qtune kernel includes. The same kernel source then compiles
//   * with NVRTC / nvcc for the GPU (PTX wrappers are inline asm: qt_cuda_gpu.h), and
//   * with the host C++ compiler for the CPU emulator when QT_EMU is defined (C++ twins: qt_cuda_emu.h),
// with no #ifdef in kernel bodies. API and rules: kernels_src/common/README.md.
// QT_ARCH is defined before the halves: their sm_90a wrappers check it.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#ifndef QT_ARCH
#define QT_ARCH (__CUDA_ARCH__ / 10)
#endif
#include "kernels_src/common/qt_cuda_gpu.h"
#elif defined(QT_EMU)
#ifndef QT_ARCH
#define QT_ARCH 80
#endif
#include "kernels_src/common/qt_cuda_emu.h"
#else
#error "qt_cuda.h: compile with NVRTC/nvcc, or define QT_EMU for the CPU emulator"
#endif

namespace qt {

// INT4 -> FP16 "magic number" dequantisation (FasterTransformer -> AWQ; cuda-facts.md section 7): the 8
// nibbles of q become 8 unsigned halves 0..15 in four f16x2 registers, h[k] = (nibble k, nibble k + 4), i.e.
// nibble order 0,4,1,5,2,6,3,7 - the AWQ packing order, so h[] holds logical columns 0..7 in order.
__device__ __forceinline__ void dequant_u4x8_to_f16x2(uint32_t q, uint32_t* h) {
  constexpr uint32_t kBottomMask = 0x000f000fu;
  constexpr uint32_t kTopMask = 0x00f000f0u;
  constexpr uint32_t kMagic = 0x64006400u;        // fp16 1024 in both halves
  constexpr uint32_t kOneSixteenth = 0x2c002c00u;  // fp16 1/16
  constexpr uint32_t kNeg64 = 0xd400d400u;         // fp16 -64
  constexpr int kAndOr = (0xf0 & 0xcc) | 0xaa;     // (a & b) | c
  const uint32_t top = q >> 8;
  h[0] = lop3<kAndOr>(q, kBottomMask, kMagic);
  h[1] = lop3<kAndOr>(q, kTopMask, kMagic);
  h[2] = lop3<kAndOr>(top, kBottomMask, kMagic);
  h[3] = lop3<kAndOr>(top, kTopMask, kMagic);
  h[0] = sub_f16x2(h[0], kMagic);                // 1024 + q - 1024
  h[1] = fma_f16x2(h[1], kOneSixteenth, kNeg64);  // (1024 + 16 q) / 16 - 64
  h[2] = sub_f16x2(h[2], kMagic);
  h[3] = fma_f16x2(h[3], kOneSixteenth, kNeg64);
}

}  // namespace qt
