#include "kernels_src/rope_kv/rope_kv_reference.h"

#include <cmath>

#include "common/half.h"

namespace qt::kernels::rope_kv {

float rope_angle(int64_t position, int64_t i, int64_t head_dim, float theta) {
  const float exponent = float(2 * i) / float(head_dim);
  const float inv_freq = 1.0f / std::pow(theta, exponent);  // float overload: fp32 as in torch
  return float(position) * inv_freq;
}

namespace {

// Normalises and rotates one head of `d` fp16 values into `out` (double), updating the largest pair sum.
void norm_rope_head(const uint16_t* x, const float* w, int64_t d, int64_t position, const RopeProblem& p,
                    double* out, double& max_pair) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) {
    const double v = half_bits_to_float(x[i]);
    ss += v * v;
  }
  const double inv = 1.0 / std::sqrt(ss / double(d) + double(p.eps));
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = half_bits_to_float(x[i]) * inv * w[i];
    const double b = half_bits_to_float(x[i + half]) * inv * w[i + half];
    const double angle = rope_angle(position, i, d, p.theta);
    const double c = std::cos(angle), s = std::sin(angle);
    out[i] = a * c - b * s;
    out[i + half] = b * c + a * s;
    max_pair = std::max(max_pair, std::fabs(a) + std::fabs(b));
  }
}

}  // namespace

RopeResult reference_qk_norm_rope_kv(const RopeProblem& p, const std::vector<uint16_t>& q,
                                     const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                                     const std::vector<float>& q_norm, const std::vector<float>& k_norm,
                                     const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache) {
  const int64_t d = p.head_dim, qd = p.heads * d, kvd = p.kv_heads * d;
  RopeResult r;
  r.q_out.resize(size_t(p.m * qd));
  r.k_cache.resize(k_cache.size());
  r.v_cache.resize(v_cache.size());
  for (size_t i = 0; i < k_cache.size(); ++i) r.k_cache[i] = half_bits_to_float(k_cache[i]);
  for (size_t i = 0; i < v_cache.size(); ++i) r.v_cache[i] = half_bits_to_float(v_cache[i]);
  for (int64_t t = 0; t < p.m; ++t) {
    const int64_t position = p.pos0 + t;
    for (int64_t h = 0; h < p.heads; ++h)
      norm_rope_head(&q[size_t(t * qd + h * d)], q_norm.data(), d, position, p, &r.q_out[size_t(t * qd + h * d)],
                     r.max_pair);
    for (int64_t h = 0; h < p.kv_heads; ++h) {
      const size_t row = size_t(position * kvd + h * d);
      norm_rope_head(&k[size_t(t * kvd + h * d)], k_norm.data(), d, position, p, &r.k_cache[row], r.max_pair);
      for (int64_t i = 0; i < d; ++i) r.v_cache[row + size_t(i)] = half_bits_to_float(v[size_t(t * kvd + h * d + i)]);
    }
  }
  return r;
}

}  // namespace qt::kernels::rope_kv
