#pragma once
// Embedding lookup, one kernel per weight type: y[m][0..N) = the dequantized row tokens[m] of the [V][N]
// table, rounded once to fp16. The weight arrays keep the model file's layout (models/core/weights.h):
// F32/F16/BF16 and Q8_0 rows are contiguous, so a thread reads its VEC elements with one vector access;
// INT8_GW and AWQ are in-major ([N][V]-ordered), so a row is a column there and each element is its own
// access (VEC of them in flight per thread). Grid (cdiv(N, THREADS*VEC), M); thread t of block x owns
// elements c0 = (x*THREADS + t)*VEC .. c0+VEC-1 (N is a multiple of VEC).
// A token outside [0, V) reads nothing and writes a row of zeros (the runtime validates tokens on the host;
// this keeps a bad one from reading out of bounds).
#include "kernels_src/common/qt_vec.h"

// This thread's slice of the output: false when it has none.
template <int THREADS, int VEC>
__device__ __forceinline__ bool embedding_slice(const int* tokens, int N, int V, int& m, int& c0, int& t, bool& valid) {
  m = blockIdx.y;
  c0 = (blockIdx.x * THREADS + threadIdx.x) * VEC;
  if (c0 >= N) return false;
  t = tokens[m];
  valid = t >= 0 && t < V;
  return true;
}

template <int VEC>
__device__ __forceinline__ void embedding_zero(float (&v)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = 0.0f;
}

// Bits 8b..8b+7 of w as a signed byte.
__device__ __forceinline__ int embedding_s8(uint32_t w, int b) { return (int)(w << (24 - 8 * b)) >> 24; }

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_f32_kernel(const int* __restrict__ tokens, const float* __restrict__ values, __half* __restrict__ y, int N, int V) {
  qt::grid_dependency_entry();
  int m, c0, t;
  bool valid;
  if (!embedding_slice<THREADS, VEC>(tokens, N, V, m, c0, t, valid)) return;
  float v[VEC];
  embedding_zero(v);
  if (valid) {
    uint32_t w[VEC];
    qt::load_words<VEC>(values + (int64_t)t * N + c0, w);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = __uint_as_float(w[j]);
  }
  qt::store_f16<VEC>(y + (int64_t)m * N + c0, v);
}

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_f16_kernel(const int* __restrict__ tokens, const __half* __restrict__ values, __half* __restrict__ y, int N, int V) {
  qt::grid_dependency_entry();
  int m, c0, t;
  bool valid;
  if (!embedding_slice<THREADS, VEC>(tokens, N, V, m, c0, t, valid)) return;
  float v[VEC];
  embedding_zero(v);
  if (valid) qt::load_f16<VEC>(values + (int64_t)t * N + c0, v);
  qt::store_f16<VEC>(y + (int64_t)m * N + c0, v);
}

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_bf16_kernel(const int* __restrict__ tokens, const uint16_t* __restrict__ values, __half* __restrict__ y, int N, int V) {
  qt::grid_dependency_entry();
  int m, c0, t;
  bool valid;
  if (!embedding_slice<THREADS, VEC>(tokens, N, V, m, c0, t, valid)) return;
  float v[VEC];
  embedding_zero(v);
  if (valid) {
    const uint16_t* p = values + (int64_t)t * N + c0;
    if constexpr (VEC == 1) {
      v[0] = __uint_as_float((uint32_t)p[0] << 16);
    } else {
      uint32_t w[VEC / 2];
      qt::load_words<VEC / 2>(p, w);
#pragma unroll
      for (int j = 0; j < VEC / 2; ++j) v[2 * j] = qt::bf16_lo(w[j]), v[2 * j + 1] = qt::bf16_hi(w[j]);
    }
  }
  qt::store_f16<VEC>(y + (int64_t)m * N + c0, v);
}

// Q8_0 (qwen3.c): q int8 [V][N], one fp32 scale per G consecutive elements of the flattened table; G is a
// multiple of VEC, so a thread's elements share one scale.
template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_q8_0_kernel(const int* __restrict__ tokens, const int8_t* __restrict__ q, const float* __restrict__ scales,
                          __half* __restrict__ y, int N, int V, int G) {
  qt::grid_dependency_entry();
  int m, c0, t;
  bool valid;
  if (!embedding_slice<THREADS, VEC>(tokens, N, V, m, c0, t, valid)) return;
  float v[VEC];
  embedding_zero(v);
  if (valid) {
    const int64_t flat = (int64_t)t * N + c0;
    const float s = scales[flat / G];
    if constexpr (VEC >= 4) {
      uint32_t w[VEC / 4];
      qt::load_words<VEC / 4>(q + flat, w);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = (float)embedding_s8(w[j / 4], j % 4) * s;
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = (float)q[flat + j] * s;
    }
  }
  qt::store_f16<VEC>(y + (int64_t)m * N + c0, v);
}

// INT8_GW: q uint8 [N][V] with +128 bias, scales (and zeros) fp16 [N/G][V]; w = (q - 128) * s (+ z).
// (q - 128) * s is exact in fp32, so the fused multiply-add rounds once, as the reference's sum does.
template <int THREADS, int VEC, bool ZEROS>
__device__ __forceinline__ void embedding_int8_gw(const int* tokens, const uint8_t* q, const __half* scales,
                                                  const __half* zeros, __half* y, int N, int V, int G) {
  int m, c0, t;
  bool valid;
  if (!embedding_slice<THREADS, VEC>(tokens, N, V, m, c0, t, valid)) return;
  float v[VEC];
  embedding_zero(v);
  if (valid) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int n = c0 + j;
      const int64_t g = (int64_t)(n / G) * V + t;
      const float qs = (float)((int)q[(int64_t)n * V + t] - 128) * __half2float(scales[g]);
      v[j] = ZEROS ? qs + __half2float(zeros[g]) : qs;
    }
  }
  qt::store_f16<VEC>(y + (int64_t)m * N + c0, v);
}

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_int8_sym_kernel(const int* __restrict__ tokens, const uint8_t* __restrict__ q, const __half* __restrict__ scales,
                              __half* __restrict__ y, int N, int V, int G) {
  qt::grid_dependency_entry();
  embedding_int8_gw<THREADS, VEC, false>(tokens, q, scales, nullptr, y, N, V, G);
}

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_int8_asym_kernel(const int* __restrict__ tokens, const uint8_t* __restrict__ q, const __half* __restrict__ scales,
                               const __half* __restrict__ zeros, __half* __restrict__ y, int N, int V, int G) {
  qt::grid_dependency_entry();
  embedding_int8_gw<THREADS, VEC, true>(tokens, q, scales, zeros, y, N, V, G);
}

// AWQ_INT4: qweight int32 [N][V/8], qzeros int32 [N/G][V/8], scales fp16 [N/G][V]; table row t is logical
// element t % 8 of word t / 8, at nibble {0,4,1,5,2,6,3,7}[t % 8]. w = (q - z) * s, exact in fp32.
template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    embedding_awq_int4_kernel(const int* __restrict__ tokens, const uint32_t* __restrict__ qweight,
                              const uint32_t* __restrict__ qzeros, const __half* __restrict__ scales,
                              __half* __restrict__ y, int N, int V, int G) {
  qt::grid_dependency_entry();
  int m, c0, t;
  bool valid;
  if (!embedding_slice<THREADS, VEC>(tokens, N, V, m, c0, t, valid)) return;
  float v[VEC];
  embedding_zero(v);
  if (valid) {
    const int e = t & 7;
    const int shift = 4 * ((e >> 1) + 4 * (e & 1));
    const int words = V / 8;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int n = c0 + j;
      const int g = n / G;
      const int qv = (int)((qweight[(int64_t)n * words + t / 8] >> shift) & 15u);
      const int zv = (int)((qzeros[(int64_t)g * words + t / 8] >> shift) & 15u);
      v[j] = (float)(qv - zv) * __half2float(scales[(int64_t)g * V + t]);
    }
  }
  qt::store_f16<VEC>(y + (int64_t)m * N + c0, v);
}
