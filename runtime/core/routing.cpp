#include "runtime/core/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace qt::rt {

void route_topk(const float* logits, int64_t m, int64_t n_experts, int64_t top_k, bool renormalize,
                int32_t* experts, float* weights) {
  std::vector<float> prob(static_cast<size_t>(n_experts));
  std::vector<int32_t> order(static_cast<size_t>(n_experts));
  for (int64_t i = 0; i < m; ++i) {
    const float* l = logits + i * n_experts;
    const float mx = *std::max_element(l, l + n_experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < n_experts; ++e) {
      prob[e] = std::exp(l[e] - mx);
      sum += prob[e];
    }
    for (int64_t e = 0; e < n_experts; ++e) prob[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return prob[a] > prob[b] || (prob[a] == prob[b] && a < b);
    });
    float top_sum = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) top_sum += prob[order[j]];
    for (int64_t j = 0; j < top_k; ++j) {
      experts[i * top_k + j] = order[j];
      weights[i * top_k + j] = renormalize ? prob[order[j]] / top_sum : prob[order[j]];
    }
  }
}

}  // namespace qt::rt
