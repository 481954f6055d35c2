#pragma once
// The step of the Q8_0 GEMM that turns one weight group's integer sums into floats, shared by the VNNI kernel
// (q8_gemm_kernels_avx512.cpp) and the AMX one (q8_gemm_kernels_amx.cpp): with the same integer sums both give
// the same bits, so a token's output does not depend on which unit multiplied it. Inline AVX-512 code:
// include only from translation units built for AVX-512.
#include <immintrin.h>

#include <cstdint>

namespace qt::rt {

// acc += (sums - 128 * x_qsum) * (w_scale * x_scale) for one token against the 16 rows of a panel, where
// sums[r] = sum over the group of (q[r] + 128) * x and x_qsum is the sum of the token's x in the group: the
// weights are stored with +128, which the activations' sum takes out exactly.
inline __m512 add_group_sums(__m512 acc, __m512i sums, __m512 w_scale, int32_t x_qsum, float x_scale) {
  const __m512i exact = _mm512_sub_epi32(sums, _mm512_set1_epi32(128 * x_qsum));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(w_scale, _mm512_set1_ps(x_scale)), acc);
}

}  // namespace qt::rt
