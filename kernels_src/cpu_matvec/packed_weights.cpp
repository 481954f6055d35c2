#include "kernels_src/cpu_matvec/packed_weights.h"

#include "common/half.h"
#include "kernels_src/cpu_matvec/thread_pool.h"

namespace qt::rt {
namespace {

void for_rows(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool) {
    pool->parallel_for(n, 64, fn);
  } else {
    fn(0, n);
  }
}

}  // namespace

PackedMatrix pack_for_cpu(const QTensor& t, ThreadPool* pool) {
  PackedMatrix p;
  p.rows = t.rows;
  p.cols = t.cols;
  p.group = t.group_size;
  const int64_t N = t.rows, K = t.cols, G = t.group_size;
  switch (t.type) {
    case WeightType::F32:
    case WeightType::F16:
    case WeightType::BF16:
      p.kind = PackedMatrix::Kind::kFloat;
      return p;
    case WeightType::Q8_0:
      p.kind = PackedMatrix::Kind::kInt8;
      p.i8 = static_cast<const int8_t*>(t.data);
      p.scale = t.scales_f32;
      return p;
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM: {
      const bool asym = weight_traits(t.type).has_zeros;
      p.kind = PackedMatrix::Kind::kInt8;
      p.i8_store.resize(size_t(N * K));
      p.scale_store.resize(size_t(N * (K / G)));
      if (asym) p.zero_store.resize(p.scale_store.size());
      const uint8_t* q = static_cast<const uint8_t*>(t.data);
      for_rows(pool, N, [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          for (int64_t k = 0; k < K; ++k) p.i8_store[n * K + k] = int8_t(int32_t(q[k * N + n]) - 128);
          for (int64_t g = 0; g < K / G; ++g) {
            p.scale_store[n * (K / G) + g] = half_bits_to_float(t.scales_f16[g * N + n]);
            if (asym) p.zero_store[n * (K / G) + g] = half_bits_to_float(t.zeros_f16[g * N + n]);
          }
        }
      });
      p.i8 = p.i8_store.data();
      p.scale = p.scale_store.data();
      p.zero = asym ? p.zero_store.data() : nullptr;
      return p;
    }
    case WeightType::AWQ_INT4: {
      if (G % 32 != 0 || K % 32 != 0) return p;  // kUnpacked
      p.kind = PackedMatrix::Kind::kUInt4;
      p.u4_store.assign(size_t(N * K / 2), 0);
      p.scale_store.resize(size_t(N * (K / G)));
      p.zero_store.resize(p.scale_store.size());
      const int32_t* qw = static_cast<const int32_t*>(t.data);
      const int64_t words = N / 8;
      for_rows(pool, N, [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t j = n / 8, e = n % 8;
          uint8_t* row = p.u4_store.data() + n * K / 2;
          for (int64_t k = 0; k < K; ++k) {
            const uint8_t q = uint8_t(awq_nibble(uint32_t(qw[k * words + j]), e));
            const int64_t block = k / 32, within = k % 32;
            row[block * 16 + within % 16] |= uint8_t(within < 16 ? q : q << 4);
          }
          for (int64_t g = 0; g < K / G; ++g) {
            p.scale_store[n * (K / G) + g] = half_bits_to_float(t.scales_f16[g * N + n]);
            p.zero_store[n * (K / G) + g] = float(awq_nibble(uint32_t(t.qzeros[g * words + j]), e));
          }
        }
      });
      p.u4 = p.u4_store.data();
      p.scale = p.scale_store.data();
      p.zero = p.zero_store.data();
      return p;
    }
  }
  return p;
}

}  // namespace qt::rt
