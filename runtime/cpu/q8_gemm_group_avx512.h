#pragma once
// The step of the Q8_0 GEMM that turns one weight group's integer sums into floats, shared by the VNNI kernel
// (q8_gemm_kernels_avx512.cpp) and the AMX one (q8_gemm_kernels_amx.cpp): with the same integer sums both give
// the same bits, so a token's output does not depend on which unit multiplied it. Inline AVX-512 code:
// include only from translation units built for AVX-512.
#include <immintrin.h>

#include <cstdint>

namespace qt::rt {

// acc += exact * (w_scale * x_scale) for one token against the 16 rows of a panel, where exact[r] is the
// group's integer product of row r and the token, already free of the weights' +128 offset.
inline __m512 add_exact_sums(__m512 acc, __m512i exact, __m512 w_scale, float x_scale) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(w_scale, _mm512_set1_ps(x_scale)), acc);
}

// The same from sums[r] = sum over the group of (q[r] + 128) * x, where x_qsum is the sum of the token's x in
// the group: the weights are stored with +128, which the activations' sum takes out exactly. A kernel that
// starts its integer sums at -128 * x_qsum instead gets the same int32 (wraparound addition is associative)
// and calls add_exact_sums, one subtraction fewer per token and group.
inline __m512 add_group_sums(__m512 acc, __m512i sums, __m512 w_scale, int32_t x_qsum, float x_scale) {
  return add_exact_sums(acc, _mm512_sub_epi32(sums, _mm512_set1_epi32(128 * x_qsum)), w_scale, x_scale);
}

}  // namespace qt::rt
