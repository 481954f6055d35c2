#include "kernels_src/attention/attention_reference.h"

#include <algorithm>
#include <cmath>

#include "common/half.h"
#include "common/parallel_ranges.h"

namespace qt::kernels::attention {

namespace {

std::vector<double> widen(const std::vector<uint16_t>& h, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = half_bits_to_float(h[i]);
  return out;
}

}  // namespace

AttentionResult reference_attention(const AttentionProblem& p, const std::vector<uint16_t>& q,
                                    const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache) {
  const int64_t d = p.head_dim, qd = p.heads * d, kvd = p.kv_heads * d, rep = p.heads / p.kv_heads;
  const int64_t rows = p.pos0 + p.m;  // the cache rows any query reads
  const double scale = 1.0 / std::sqrt(double(d));
  const std::vector<double> qv = widen(q, size_t(p.m * qd)), kv = widen(k_cache, size_t(rows * kvd)),
                            vv = widen(v_cache, size_t(rows * kvd));
  AttentionResult r;
  r.out.assign(size_t(p.m * qd), 0.0);
  for (double v : vv) r.max_abs_v = std::max(r.max_abs_v, std::fabs(v));
  // Query rows are independent: a prefill's thousands of them spread over every core, each keeping its own
  // largest score.
  std::vector<double> max_score(size_t(p.m), 0.0);
  const double work = double(p.m) * double(rows) * double(qd);
  parallel_ranges(p.m, work, [&](int64_t i0, int64_t i1) {
    std::vector<double> w;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t len = p.pos0 + i + 1;
      w.assign(size_t(len), 0.0);
      for (int64_t h = 0; h < p.heads; ++h) {
        const int64_t kvh = h / rep;
        const double* qh = &qv[size_t(i * qd + h * d)];
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          const double* kj = &kv[size_t(j * kvd + kvh * d)];
          double dot = 0, mag = 0;
          for (int64_t e = 0; e < d; ++e) {
            const double t = qh[e] * kj[e];
            dot += t, mag += std::fabs(t);
          }
          w[size_t(j)] = dot * scale;
          mx = std::max(mx, w[size_t(j)]);
          max_score[size_t(i)] = std::max(max_score[size_t(i)], mag * scale);
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        double* oh = &r.out[size_t(i * qd + h * d)];
        for (int64_t j = 0; j < len; ++j) {
          const double* vj = &vv[size_t(j * kvd + kvh * d)];
          const double a = w[size_t(j)] / sum;
          for (int64_t e = 0; e < d; ++e) oh[e] += a * vj[e];
        }
      }
    }
  });
  for (double s : max_score) r.max_score = std::max(r.max_score, s);
  return r;
}

}  // namespace qt::kernels::attention
