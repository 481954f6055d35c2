#include "kernels_src/awq/awq_reference.h"

#include <random>

#include "common/half.h"
#include "models/core/weights.h"
#include "models/quant/awq_int4.h"

namespace qt::kernels::awq {
namespace {

QTensor view(const AwqData& d) {
  QTensor t;
  t.type = WeightType::AWQ_INT4;
  t.rows = d.n;
  t.cols = d.k;
  t.group_size = static_cast<int32_t>(d.group);
  t.data = d.qweight.data();
  t.qzeros = d.qzeros.data();
  t.scales_f16 = d.scales.data();
  return t;
}

}  // namespace

AwqData make_awq_data(int64_t m, int64_t n, int64_t k, int64_t group, uint64_t seed) {
  AwqData d;
  d.m = m, d.n = n, d.k = k, d.group = group;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f), act(-1.0f, 1.0f);
  auto pack_rows = [&](int64_t rows, std::vector<int32_t>& out) {
    out.resize(size_t(rows * n / 8));
    uint8_t v[8];
    for (auto& w : out) {
      for (auto& e : v) e = static_cast<uint8_t>(nibble(rng));
      w = static_cast<int32_t>(qt::quant::awq_pack8(v));
    }
  };
  pack_rows(k, d.qweight);
  pack_rows(k / group, d.qzeros);
  d.scales.resize(size_t(k / group * n));
  for (auto& s : d.scales) s = float_to_half_bits(scale(rng));
  d.x.resize(size_t(m * k));
  for (auto& v : d.x) v = float_to_half_bits(act(rng));
  return d;
}

std::vector<float> reference_dequant(const AwqData& d) {
  const QTensor t = view(d);
  std::vector<float> w(size_t(d.k * d.n));
  for (int64_t kk = 0; kk < d.k; ++kk)
    for (int64_t nn = 0; nn < d.n; ++nn) w[size_t(kk * d.n + nn)] = round_to_half(dequant_element(t, nn, kk));
  return w;
}

std::vector<double> reference_gemm(const AwqData& d, std::vector<double>* abs_sum) {
  const std::vector<float> w = reference_dequant(d);
  std::vector<double> y(size_t(d.m * d.n), 0.0);
  if (abs_sum) abs_sum->assign(y.size(), 0.0);
  for (int64_t mm = 0; mm < d.m; ++mm) {
    double* row = y.data() + mm * d.n;
    double* arow = abs_sum ? abs_sum->data() + mm * d.n : nullptr;
    for (int64_t kk = 0; kk < d.k; ++kk) {
      const double xv = half_bits_to_float(d.x[size_t(mm * d.k + kk)]);
      const float* wr = w.data() + kk * d.n;
      for (int64_t nn = 0; nn < d.n; ++nn) {
        row[nn] += xv * wr[nn];
        if (arow) arow[nn] += std::abs(xv * wr[nn]);
      }
    }
  }
  return y;
}

}  // namespace qt::kernels::awq
