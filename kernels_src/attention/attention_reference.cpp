#include "kernels_src/attention/attention_reference.h"

#include <cmath>

#include "common/half.h"

namespace qt::kernels::attention {

AttentionResult reference_attention(const AttentionProblem& p, const std::vector<uint16_t>& q,
                                    const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache) {
  const int64_t d = p.head_dim, qd = p.heads * d, kvd = p.kv_heads * d, rep = p.heads / p.kv_heads;
  const double scale = 1.0 / std::sqrt(double(d));
  AttentionResult r;
  r.out.assign(size_t(p.m * qd), 0.0);
  std::vector<double> w;
  for (int64_t i = 0; i < p.m; ++i) {
    const int64_t len = p.pos0 + i + 1;
    w.assign(size_t(len), 0.0);
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t kv = h / rep;
      const uint16_t* qh = &q[size_t(i * qd + h * d)];
      double mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const uint16_t* kj = &k_cache[size_t(j * kvd + kv * d)];
        double dot = 0, mag = 0;
        for (int64_t e = 0; e < d; ++e) {
          const double t = double(half_bits_to_float(qh[e])) * half_bits_to_float(kj[e]);
          dot += t, mag += std::fabs(t);
        }
        w[size_t(j)] = dot * scale;
        mx = std::max(mx, w[size_t(j)]);
        r.max_score = std::max(r.max_score, mag * scale);
      }
      double sum = 0;
      for (double& x : w) sum += (x = std::exp(x - mx));
      double* oh = &r.out[size_t(i * qd + h * d)];
      for (int64_t j = 0; j < len; ++j) {
        const uint16_t* vj = &v_cache[size_t(j * kvd + kv * d)];
        for (int64_t e = 0; e < d; ++e) {
          const double v = half_bits_to_float(vj[e]);
          oh[e] += w[size_t(j)] / sum * v;
          r.max_abs_v = std::max(r.max_abs_v, std::fabs(v));
        }
      }
    }
  }
  return r;
}

}  // namespace qt::kernels::attention
