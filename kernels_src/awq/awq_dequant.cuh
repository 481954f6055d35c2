#pragma once
// AWQ INT4 -> fp16 W[K][N] (row k holds the N output features of input feature k), for the cuBLAS path and
// pre-dequantized weights. Each thread expands WORDS consecutive packed words of one row; WORDS divides
// N/8, so a thread never straddles rows. Bit-exact with the reference: fp16((q - z) * s).
#include "kernels_src/awq/awq_common.cuh"

template <int THREADS, int WORDS>
__global__ void __launch_bounds__(THREADS)
    awq_dequant_kernel(const uint32_t* qweight, const uint32_t* qzeros, const __half* scales, __half* w, int K, int N,
                       int G) {
  qt::grid_dependency_entry();
  const int words = N / 8;
  const int64_t total = (int64_t)K * words;
  const int64_t first = ((int64_t)blockIdx.x * THREADS + threadIdx.x) * WORDS;
  if (first >= total) return;
  const int k = (int)(first / words);
  const int j = (int)(first % words);
  const int g = k / G;
  uint32_t q[WORDS], z[WORDS];
  awq::load_words<WORDS>(qweight + first, q);
  awq::load_words<WORDS>(qzeros + (int64_t)g * words + j, z);
#pragma unroll
  for (int v = 0; v < WORDS; ++v) {
    uint32_t zero[4], s[4], out[4];
    awq::unpack_f16x8(z[v], zero);
    awq::load_f16x8(scales + (int64_t)g * N + (j + v) * 8, s);
    awq::dequant_f16x8(q[v], zero, s, out);
    *reinterpret_cast<uint4*>(w + (int64_t)k * N + (j + v) * 8) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}
