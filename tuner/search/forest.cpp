#include "tuner/search/forest.h"

#include <algorithm>
#include <cmath>

namespace qt::tune {

void RandomForest::fit(const std::vector<float>& x, size_t d, const std::vector<double>& y, Rng& rng) {
  trees_.clear();
  const size_t n = y.size();
  if (n == 0 || d == 0 || x.size() != n * d) return;
  y_ = &y, d_ = d;
  features_.resize(d);
  // Bins per feature: its distinct values, or 64 quantile groups of them.
  constexpr size_t kMaxBins = 64;
  edges_.assign(d, {});
  lo_.assign(d, {});
  hi_.assign(d, {});
  bin_.assign(n * d, 0);
  std::vector<float> col;
  for (size_t f = 0; f < d; ++f) {
    col.resize(n);
    for (size_t i = 0; i < n; ++i) col[i] = x[i * d + f];
    std::sort(col.begin(), col.end());
    col.erase(std::unique(col.begin(), col.end()), col.end());
    std::vector<float>& e = edges_[f];
    const size_t m = col.size();
    if (m <= kMaxBins) {
      for (size_t i = 0; i + 1 < m; ++i) e.push_back(0.5f * (col[i] + col[i + 1]));
    } else {
      for (size_t b = 1; b < kMaxBins; ++b) {
        size_t i = b * m / kMaxBins;
        float edge = 0.5f * (col[i - 1] + col[i]);
        if (e.empty() || edge > e.back()) e.push_back(edge);
      }
    }
    lo_[f].assign(e.size() + 1, INFINITY);
    hi_[f].assign(e.size() + 1, -INFINITY);
    for (size_t i = 0; i < n; ++i) {
      const float v = x[i * d + f];
      const size_t b = size_t(std::upper_bound(e.begin(), e.end(), v) - e.begin());
      bin_[i * d + f] = uint8_t(b);
      lo_[f][b] = std::min(lo_[f][b], v);
      hi_[f][b] = std::max(hi_[f][b], v);
    }
  }
  for (int t = 0; t < opt_.trees; ++t) {
    std::vector<uint32_t> idx(n);
    for (auto& i : idx) i = uint32_t(rng.below(n));
    Tree tree;
    tree.reserve(2 * n / size_t(std::max(1, opt_.min_leaf)) + 1);
    grow(tree, idx, 0, n, 0, rng);
    trees_.push_back(std::move(tree));
  }
  y_ = nullptr;
}

int RandomForest::grow(Tree& t, std::vector<uint32_t>& idx, size_t lo, size_t hi, int depth, Rng& rng) {
  const std::vector<double>& y = *y_;
  const size_t n = hi - lo;
  double sum = 0, sq = 0;
  for (size_t i = lo; i < hi; ++i) sum += y[idx[i]], sq += y[idx[i]] * y[idx[i]];
  const double mean = sum / double(n);
  const double sse = std::max(0.0, sq - sum * mean);
  const int me = int(t.size());
  t.push_back({});
  t[size_t(me)].value = mean;
  t[size_t(me)].variance = sse / double(n);
  const size_t min_leaf = size_t(std::max(1, opt_.min_leaf));
  if (n < 2 * min_leaf || depth >= opt_.max_depth || sse <= 1e-12 * double(n)) return me;

  // A random share of the features, at least one.
  for (size_t f = 0; f < d_; ++f) features_[f] = f;
  rng.shuffle(features_);
  const size_t tries = std::max<size_t>(1, size_t(std::ceil(opt_.feature_share * double(d_))));
  int best_f = -1;
  double best_sse = sse * (1 - 1e-9);
  int best_bin = -1;
  float best_thr = 0;
  for (size_t k = 0; k < tries && k < d_; ++k) {
    const size_t f = features_[k];
    const size_t nb = edges_[f].size() + 1;
    if (nb < 2) continue;
    hist_n_.assign(nb, 0), hist_s_.assign(nb, 0), hist_q_.assign(nb, 0);
    for (size_t i = lo; i < hi; ++i) {
      const size_t b = bin_[size_t(idx[i]) * d_ + f];
      const double v = y[idx[i]];
      hist_n_[b] += 1, hist_s_[b] += v, hist_q_[b] += v * v;
    }
    double ln = 0, ls = 0, lq = 0;
    for (size_t b = 0; b + 1 < nb; ++b) {
      ln += hist_n_[b], ls += hist_s_[b], lq += hist_q_[b];
      const double rn = double(n) - ln;
      if (hist_n_[b] == 0 || ln < double(min_leaf) || rn < double(min_leaf)) continue;
      const double rs = sum - ls, rq = sq - lq;
      const double s = (lq - ls * ls / ln) + (rq - rs * rs / rn);
      if (s < best_sse) {
        best_sse = s;
        best_f = int(f);
        best_bin = int(b);
        // Halfway between the values on either side *in this node*, as a split between sorted samples would
        // be: a value no sample had falls to the nearer side.
        size_t next = b + 1;
        while (hist_n_[next] == 0) ++next;
        best_thr = 0.5f * (hi_[f][b] + lo_[f][next]);
      }
    }
  }
  if (best_f < 0) return me;
  // Left: bins up to best_bin, whose values all lie below best_thr (what predict() compares with).
  auto mid = std::partition(idx.begin() + long(lo), idx.begin() + long(hi), [&](uint32_t i) {
    return int(bin_[size_t(i) * d_ + size_t(best_f)]) <= best_bin;
  });
  const size_t m = size_t(mid - idx.begin());
  const int left = grow(t, idx, lo, m, depth + 1, rng);
  const int right = grow(t, idx, m, hi, depth + 1, rng);
  t[size_t(me)].feature = best_f;
  t[size_t(me)].threshold = best_thr;
  t[size_t(me)].left = left;
  t[size_t(me)].right = right;
  return me;
}

Prediction RandomForest::predict(const float* row) const {
  Prediction p;
  if (trees_.empty()) return p;
  double sum = 0, sq = 0, inner = 0;
  for (const Tree& t : trees_) {
    const Node* n = &t[0];
    while (n->feature >= 0) n = &t[size_t(row[n->feature] < n->threshold ? n->left : n->right)];
    sum += n->value, sq += n->value * n->value, inner += n->variance;
  }
  const double k = double(trees_.size());
  p.mean = sum / k;
  p.variance = std::max(0.0, sq / k - p.mean * p.mean) + inner / k;
  return p;
}

}  // namespace qt::tune
