#include "kernels_src/moe/moe_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/error.h"
#include "common/half.h"

namespace qt::kernels::moe {

void gating(const float* logits, int64_t m, int64_t experts, int64_t top_k, bool renormalize, int32_t* ids,
            float* weights) {
  std::vector<float> prob(static_cast<size_t>(experts));
  std::vector<int32_t> order(static_cast<size_t>(experts));
  for (int64_t i = 0; i < m; ++i) {
    const float* l = logits + i * experts;
    const float mx = *std::max_element(l, l + experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) {
      prob[size_t(e)] = std::exp(l[e] - mx);
      sum += prob[size_t(e)];
    }
    for (float& p : prob) p /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return prob[size_t(a)] > prob[size_t(b)] || (prob[size_t(a)] == prob[size_t(b)] && a < b);
    });
    float top_sum = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) top_sum += prob[size_t(order[size_t(j)])];
    for (int64_t j = 0; j < top_k; ++j) {
      const float p = prob[size_t(order[size_t(j)])];
      ids[i * top_k + j] = order[size_t(j)];
      weights[i * top_k + j] = renormalize ? p / top_sum : p;
    }
  }
}

InitRouting init_routing(const int32_t* ids, int64_t rows, int64_t top_k, int64_t experts, int64_t start, int64_t end,
                         TokenCounts mode) {
  if (start < 0 || end > experts || start > end)
    throw Error("init routing: active expert range [" + std::to_string(start) + ", " + std::to_string(end) +
                ") is not inside [0, " + std::to_string(experts) + ")");
  const int64_t count = rows * top_k;
  InitRouting r;
  r.sorted_row.assign(size_t(count), -1);
  r.expanded_row_idx.assign(size_t(count), -1);
  std::vector<int64_t> tokens(size_t(end - start), 0);
  std::vector<int32_t> active;
  for (int64_t i = 0; i < count; ++i) {
    if (ids[i] >= start && ids[i] < end) active.push_back(int32_t(i)), ++tokens[size_t(ids[i] - start)];
  }
  std::stable_sort(active.begin(), active.end(), [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
  r.active = int64_t(active.size());
  for (size_t p = 0; p < active.size(); ++p) {
    r.sorted_row[p] = active[p];
    r.expanded_row_idx[size_t(active[p])] = int32_t(p);
  }
  if (mode == TokenCounts::Count) {
    r.expert_tokens = tokens;
  } else {
    for (int64_t e = start; e < end; ++e)
      if (tokens[size_t(e - start)] > 0) r.expert_tokens.insert(r.expert_tokens.end(), {e, tokens[size_t(e - start)]});
  }
  return r;
}

void expand_rows(const InitRouting& r, int64_t top_k, const float* x, int64_t h, float* expanded) {
  for (int64_t p = 0; p < r.active; ++p) std::copy_n(x + r.sorted_row[size_t(p)] / top_k * h, h, expanded + p * h);
}

void expand_rows_int8(const InitRouting& r, int64_t top_k, const float* x, int64_t h, int8_t* q, float* scale) {
  for (int64_t p = 0; p < r.active; ++p) {
    const float* row = x + r.sorted_row[size_t(p)] / top_k * h;
    float amax = 0.0f;
    for (int64_t c = 0; c < h; ++c) amax = std::max(amax, std::fabs(row[c]));
    const float s = amax / 127.0f;
    scale[p] = s;
    for (int64_t c = 0; c < h; ++c) q[p * h + c] = s > 0.0f ? int8_t(std::round(row[c] / s)) : int8_t(0);
  }
}

int64_t align_capacity(int64_t count, int64_t experts, int64_t block) {
  const int64_t slots = count + std::min(experts, count) * (block - 1);
  return (slots + block - 1) / block * block;
}

Alignment align_blocks(const int32_t* ids, int64_t count, int64_t experts, int64_t block) {
  Alignment a;
  const int64_t cap = align_capacity(count, experts, block);
  a.sorted_ids.assign(size_t(cap), int32_t(count));
  a.block_expert.assign(size_t(cap / block), -1);
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(experts));
  for (int64_t i = 0; i < count; ++i) rows.at(size_t(ids[i])).push_back(int32_t(i));
  int64_t slot = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const auto& r = rows[size_t(e)];
    std::copy(r.begin(), r.end(), a.sorted_ids.begin() + slot);
    const int64_t padded = (int64_t(r.size()) + block - 1) / block * block;
    for (int64_t b = 0; b < padded / block; ++b) a.block_expert[size_t(slot / block + b)] = int32_t(e);
    slot += padded;
  }
  a.padded = slot;
  return a;
}

void expert_row(const QTensor& w, const uint16_t* a_f16, int64_t n_cols, double* y, double* y_abs) {
  std::vector<float> row(size_t(w.cols));
  for (int64_t n = 0; n < n_cols; ++n) {
    dequantize_row(w, n, row.data());
    double s = 0, s_abs = 0;
    for (int64_t k = 0; k < w.cols; ++k) {
      const double t = double(half_bits_to_float(a_f16[k])) * row[size_t(k)];
      s += t, s_abs += std::fabs(t);
    }
    y[n] = s, y_abs[n] = s_abs;
  }
}

void finalize(const float* y, const int32_t* rows, const float* weights, int64_t m, int64_t top_k, int64_t h,
              float* out) {
  for (int64_t t = 0; t < m; ++t) {
    float* o = out + t * h;
    std::fill_n(o, h, 0.0f);
    for (int64_t j = 0; j < top_k; ++j) {
      const float w = weights[t * top_k + j];
      const float* yr = y + int64_t(rows[t * top_k + j]) * h;
      for (int64_t c = 0; c < h; ++c) o[c] += w * yr[c];
    }
  }
}

namespace {
// Rows of each 16 are permuted so that LDSM lands them in the right threads: permuted row t holds source
// row kRowPerm[t].
constexpr int kRowPerm[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
// Bytes 1 and 2 of every 32-bit word trade places (registers read [e3, e1, e2, e0]).
constexpr int kByteSwap[4] = {0, 2, 1, 3};
}  // namespace

int64_t trtllm_int8_offset(int64_t k_index, int64_t n_index, int64_t k) {
  int within = 0;
  while (kRowPerm[within] != int(k_index % 16)) ++within;
  const int64_t kp = 16 * (k_index / 16) + within;
  const int64_t p = (n_index / 2) * 2 * k + (kp / 64) * 128 + (n_index % 2) * 64 + kp % 64;
  return 4 * (p / 4) + kByteSwap[p % 4];
}

std::vector<uint8_t> trtllm_int8_layout(const uint8_t* q, int64_t k, int64_t n) {
  if (k % 64 || n % 32)
    throw Error("TensorRT-LLM INT8 layout needs K % 64 == 0 and N % 32 == 0 (got K=" + std::to_string(k) +
                ", N=" + std::to_string(n) + ")");
  std::vector<uint8_t> out(size_t(k * n));
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t c = 0; c < n; ++c) out[size_t(trtllm_int8_offset(kk, c, k))] = q[kk * n + c];
  return out;
}

}  // namespace qt::kernels::moe
