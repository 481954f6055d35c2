#include "kernels_src/q8_0/q8_reference.h"

#include <cmath>

#include "common/half.h"
#include "common/rng.h"
#include "models/core/weights.h"

namespace qt::kernels::q8_0 {

Q8Data make_q8_data(int64_t m, int64_t n, int64_t k, int64_t group, uint64_t seed) {
  Q8Data d;
  d.m = m, d.n = n, d.k = k, d.group = group;
  Rng rng(seed);
  d.q.resize(size_t(n * k));
  for (auto& v : d.q) v = static_cast<int8_t>(static_cast<int>(rng.below(255)) - 127);
  d.scales.resize(size_t(n * k / group));
  for (auto& s : d.scales) s = static_cast<float>(0.0005 + 0.0045 * rng.uniform());
  d.x.resize(size_t(m * k));
  for (auto& v : d.x) v = float_to_half_bits(static_cast<float>(2.0 * rng.uniform() - 1.0));
  return d;
}

Q8Result reference_linear(const Q8Data& d) {
  QTensor t;
  t.type = WeightType::Q8_0;
  t.rows = d.n;
  t.cols = d.k;
  t.group_size = static_cast<int32_t>(d.group);
  t.data = d.q.data();
  t.scales_f32 = d.scales.data();
  const std::vector<float> w = dequantize(t);  // [N][K]

  Q8Result r;
  const size_t outputs = size_t(d.m * d.n);
  r.y.assign(outputs, 0.0);
  r.abs_xw.assign(outputs, 0.0);
  r.abs_x.assign(outputs, 0.0);
  r.act_quant.assign(outputs, 0.0);
  std::vector<double> xv(size_t(d.k));
  for (int64_t mm = 0; mm < d.m; ++mm) {
    for (int64_t kk = 0; kk < d.k; ++kk) xv[size_t(kk)] = half_bits_to_float(d.x[size_t(mm * d.k + kk)]);
    double sum_abs_x = 0;
    for (double v : xv) sum_abs_x += std::abs(v);
    for (int64_t nn = 0; nn < d.n; ++nn) {
      const float* wr = w.data() + nn * d.k;
      const size_t o = size_t(mm * d.n + nn);
      double y = 0, axw = 0, act = 0;
      for (int64_t g0 = 0; g0 < d.k; g0 += d.group) {
        double amax = 0, abs_w = 0;
        for (int64_t kk = g0; kk < g0 + d.group; ++kk) {
          y += xv[size_t(kk)] * wr[kk];
          axw += std::abs(xv[size_t(kk)] * wr[kk]);
          amax = std::max(amax, std::abs(xv[size_t(kk)]));
          abs_w += std::abs(double(wr[kk]));
        }
        act += amax * abs_w;
      }
      r.y[o] = y, r.abs_xw[o] = axw, r.abs_x[o] = sum_abs_x, r.act_quant[o] = act;
    }
  }
  return r;
}

void quantize_activations(const Q8Data& d, std::vector<int8_t>& xq, std::vector<float>& xs) {
  xq.assign(size_t(d.m * d.k), 0);
  xs.assign(size_t(d.m * d.k / d.group), 0.0f);
  for (int64_t g = 0; g < d.m * d.k / d.group; ++g) {
    float amax = 0.0f;
    for (int64_t i = g * d.group; i < (g + 1) * d.group; ++i)
      amax = std::fmax(amax, std::fabs(half_bits_to_float(d.x[size_t(i)])));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t i = g * d.group; i < (g + 1) * d.group; ++i)
      xq[size_t(i)] = static_cast<int8_t>(std::nearbyint(half_bits_to_float(d.x[size_t(i)]) * inv));
    xs[size_t(g)] = amax / 127.0f;
  }
}

}  // namespace qt::kernels::q8_0
