#include "kernels_src/cpu_matvec/quantized_matvec.h"

#include <algorithm>
#include <cmath>

#include "kernels_src/cpu_matvec/thread_pool.h"

namespace qt::rt {

void quantize_rows(const float* x, int64_t m, int64_t k, int64_t group, QuantizedRows& out) {
  const int64_t ng = k / group;
  out.k = k;
  out.group = group;
  out.q.resize(size_t(m * k));
  out.scale.resize(size_t(m * ng));
  out.qsum.resize(size_t(m * ng));
  out.sum.resize(size_t(m * ng));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < ng; ++g) {
      const float* xg = x + i * k + g * group;
      int8_t* qg = out.q.data() + i * k + g * group;
      float amax = 0.0f, sum = 0.0f;
      for (int64_t j = 0; j < group; ++j) {
        amax = std::max(amax, std::fabs(xg[j]));
        sum += xg[j];
      }
      const float s = amax / 127.0f;
      const float inv = s > 0.0f ? 1.0f / s : 0.0f;
      int32_t qs = 0;
      for (int64_t j = 0; j < group; ++j) {
        const int32_t v = std::clamp(static_cast<int32_t>(std::nearbyint(xg[j] * inv)), -127, 127);
        qg[j] = static_cast<int8_t>(v);
        qs += v;
      }
      out.scale[i * ng + g] = s;
      out.qsum[i * ng + g] = qs;
      out.sum[i * ng + g] = sum;
    }
  }
}

void prefetch_bytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
}

void quantized_rows(const CpuKernels& kr, const PackedMatrix& p, const QuantizedRows& xr, int64_t m, int64_t n0,
                    int64_t n1, float* y) {
  const int64_t N = p.rows, K = p.cols, G = p.group, ng = K / G;
  // The additive offset of INT8_GW_ASYM: sum over groups of z * (sum of the fp32 activations in the group).
  auto zero_term = [&](int64_t n, int64_t i) {
    const float* z = p.zero + n * ng;
    const float* xsum = xr.sum.data() + i * ng;
    float v = 0.0f;
    for (int64_t g = 0; g < ng; ++g) v += z[g] * xsum[g];
    return v;
  };
  int64_t i = 0;
  if (p.kind == PackedMatrix::Kind::kInt8) {
    // Prefill: four activation rows share each weight row while it is in L1.
    for (; i + 4 <= m; i += 4) {
      float out[4];
      for (int64_t n = n0; n < n1; ++n) {
        kr.dot_i8_x4(p.i8 + n * K, xr.q.data() + i * K, K, p.scale + n * ng, xr.scale.data() + i * ng, ng, K, G, out);
        for (int64_t r = 0; r < 4; ++r) y[(i + r) * N + n] = p.zero ? out[r] + zero_term(n, i + r) : out[r];
      }
    }
  }
  for (; i < m; ++i) {
    const int8_t* xi = xr.q.data() + i * K;
    const float* xs = xr.scale.data() + i * ng;
    float* yi = y + i * N;
    if (p.kind == PackedMatrix::Kind::kInt8) {
      for (int64_t n = n0; n < n1; ++n) {
        // Decode streams the rows once, from the file's pages.
        if (n + 1 < n1) prefetch_bytes(p.i8 + (n + 1) * K, K);
        float v = kr.dot_i8(p.i8 + n * K, xi, p.scale + n * ng, xs, K, G);
        if (p.zero) v += zero_term(n, i);
        yi[n] = v;
      }
    } else {
      const int32_t* qsum = xr.qsum.data() + i * ng;
      for (int64_t n = n0; n < n1; ++n) {
        yi[n] = kr.dot_u4(p.u4 + n * K / 2, xi, p.scale + n * ng, p.zero + n * ng, xs, qsum, K, G);
      }
    }
  }
}

void quantized_matvec(const CpuKernels& kernels, ThreadPool& pool, const PackedMatrix& p, const float* x, int64_t m,
                      int64_t rows_per_task, float* y) {
  // Named through a reference: inside the lambda a thread_local would name each worker's own (empty) copy.
  thread_local QuantizedRows scratch_rows;
  QuantizedRows& xq = scratch_rows;
  quantize_rows(x, m, p.cols, p.group, xq);
  pool.parallel_for(p.rows, rows_per_task, [&](int64_t n0, int64_t n1) { quantized_rows(kernels, p, xq, m, n0, n1, y); });
}

}  // namespace qt::rt
