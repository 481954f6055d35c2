#pragma once
// The inner loops of the fast CPU path, one implementation per instruction set, chosen at run time.
// This header is included by translation units compiled with -mavx2 / -mavx512*: it must declare only
// plain functions and POD types, so no inline code compiled for a wider ISA can leak into generic code.
#include <cstdint>

namespace qt::rt {

// The values are stored (a tuned cache's CPU choice), so a new one takes the next number. They are not an order:
// AVX-VNNI (AVX2 with the VEX-encoded vpdpbusd: Intel's client cores from Alder Lake on) is missing from CPUs
// that have AVX-512 VNNI (Cascade Lake, Ice Lake), so ask isa_supported(), never compare.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512Vnni = 2, kAvxVnni = 3 };
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni};

const char* isa_name(Isa isa);
bool isa_from_name(const char* name, Isa* isa);  // isa_name's inverse: false for a name it never returns
bool isa_supported(Isa isa);  // this CPU (and its OS) runs the kernels of `isa`
Isa detect_isa();  // the fastest ISA this CPU supports (and that this build has kernels for)
// The fastest ISA this CPU runs whose dot products (CpuKernels) are `isa`'s, e.g. AVX-VNNI for AVX2 where the CPU
// has it: what a tuned choice of dot products runs with, so that the choice never gives up a faster Q8_0 GEMM.
Isa fastest_with_dot_products_of(Isa isa);

struct CpuKernels {
  Isa isa;
  // Integer dot product of int8 rows split in groups of `group` (k % group == 0):
  //   sum_g (sum_{i in g} w[i] * x[i]) * w_scale[g] * x_scale[g]. x must be in [-127, 127]; w may be -128.
  float (*dot_i8)(const int8_t* w, const int8_t* x, const float* w_scale, const float* x_scale, int64_t k,
                  int64_t group);
  // Four activation rows (x + r * x_stride, x_scale + r * xs_stride) against one weight row: out[r] is
  // bit-identical to dot_i8 of that row, so batching rows never changes a result.
  void (*dot_i8_x4)(const int8_t* w, const int8_t* x, int64_t x_stride, const float* w_scale, const float* x_scale,
                    int64_t xs_stride, int64_t k, int64_t group, float* out);
  // Unsigned 4-bit row (packing of packed_weights.h: each 32 elements take 16 bytes, low nibbles the first
  // 16, high nibbles the next 16); w = (q - zero) * scale per group:
  //   sum_g w_scale[g] * x_scale[g] * (sum_{i in g} q[i] * x[i] - w_zero[g] * x_qsum[g]).
  // group % 32 == 0 and k % group == 0.
  float (*dot_u4)(const uint8_t* w, const int8_t* x, const float* w_scale, const float* w_zero,
                  const float* x_scale, const int32_t* x_qsum, int64_t k, int64_t group);
  float (*dot_f32)(const float* w, const float* x, int64_t k);
  float (*dot_f16)(const uint16_t* w, const float* x, int64_t k);
  float (*dot_bf16)(const uint16_t* w, const float* x, int64_t k);
};

// Throws qt::Error if this CPU cannot run `isa`. AVX-VNNI's table holds AVX2's dot products: VNNI serves the Q8_0
// GEMM (runtime/cpu/q8_gemm_kernels.h), which the fast path runs on every Q8_0 matrix.
const CpuKernels& kernels_for(Isa isa);

// Per-ISA tables (defined in kernels_<isa>.cpp).
extern const CpuKernels kScalarKernels;
extern const CpuKernels kAvx2Kernels;
extern const CpuKernels kAvxVnniKernels;
extern const CpuKernels kAvx512Kernels;

// Scalar versions, also used by the SIMD ones for group sizes their vectors do not fit.
float dot_i8_scalar(const int8_t* w, const int8_t* x, const float* w_scale, const float* x_scale, int64_t k,
                    int64_t group);
void dot_i8_x4_scalar(const int8_t* w, const int8_t* x, int64_t x_stride, const float* w_scale,
                      const float* x_scale, int64_t xs_stride, int64_t k, int64_t group, float* out);
float dot_u4_scalar(const uint8_t* w, const int8_t* x, const float* w_scale, const float* w_zero,
                    const float* x_scale, const int32_t* x_qsum, int64_t k, int64_t group);

}  // namespace qt::rt
