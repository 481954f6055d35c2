#pragma once
// INT8 group-wise weights in the frag layout (frag_layout.h) -> fp16 W[K][N], for the dequant + cuBLASLt path:
// the runtime keeps INT8_GW_SYM projections only in the frag layout, so the fp16 copy is made from it.
// One thread per (16-row K tile, lane row class t, 8-column chunk j): the four rows 2t, 2t+1, 2t+8, 2t+9 of
// the chunk's columns are exactly the bytes of the eight words lanes 4g + t hold for the chunk's fragment, so
// every loaded byte is used; consecutive threads take consecutive chunks of the same rows, so each of the four
// 16-byte stores of a warp writes one contiguous run. Bit-exact with the reference: fp16((u - 128) * s).
#include "kernels_src/common/qt_cuda.h"

template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    frag_dequant_int8_kernel(const uint32_t* bq, const __half* bs, __half* w, int N, int K, int G) {
  const int chunks = N / 8;  // 8-column chunks per row of W (N is a multiple of 8)
  const int64_t item = (int64_t)blockIdx.x * THREADS + threadIdx.x;
  if (item >= (int64_t)(K / 16) * 4 * chunks) return;
  const int j = (int)(item % chunks);
  const int t = (int)(item / chunks % 4);
  const int kt = (int)(item / chunks / 4);
  const int nt = j / 8, f = j % 8;  // column tile and fragment of the chunk
  const int ktiles = K / 16;
  // The word of fragment f for lane 4g + t: half f / 4, lane's run of four, slot f % 4.
  const uint32_t* tile = bq + ((int64_t)nt * ktiles + kt) * 256 + 128 * (f / 4) + 4 * t + f % 4;
  uint32_t q[8];
#pragma unroll
  for (int g = 0; g < 8; ++g) q[g] = tile[16 * g];
  // The scales of columns 8f + 2p and 8f + 2p + 1 are one word of the (tile, group) run of 64.
  const uint32_t* srun = reinterpret_cast<const uint32_t*>(bs + ((int64_t)nt * (K / G) + kt * 16 / G) * 64) +
                         16 * (f / 4) + f % 4;
  uint32_t s[4];
#pragma unroll
  for (int p = 0; p < 4; ++p) s[p] = srun[4 * p];
  // Byte e of each word is row 2t + (e & 1) + 8 (e >> 1). 0x6400 | u is the fp16 1024 + u, so subtracting
  // 1152 (0x6480) leaves u - 128 exactly; one f16x2 multiply then rounds the product once.
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    uint32_t out[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const uint32_t lo = (q[2 * p] >> (8 * e)) & 0xffu, hi = (q[2 * p + 1] >> (8 * e)) & 0xffu;
      const uint32_t v = qt::sub_f16x2(lo | (hi << 16) | 0x64006400u, 0x64806480u);
      out[p] = qt::mul_f16x2(v, s[p]);
    }
    const int row = kt * 16 + 2 * t + (e & 1) + 8 * (e >> 1);
    *reinterpret_cast<uint4*>(w + (int64_t)row * N + 8 * j) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}
