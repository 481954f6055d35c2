#include "tuner/search/forest.h"

#include <algorithm>
#include <cmath>

namespace qt::tune {

void RandomForest::fit(const std::vector<float>& x, size_t d, const std::vector<double>& y, Rng& rng) {
  trees_.clear();
  const size_t n = y.size();
  if (n == 0 || d == 0 || x.size() != n * d) return;
  x_ = &x, y_ = &y, d_ = d;
  features_.resize(d);
  for (int t = 0; t < opt_.trees; ++t) {
    std::vector<uint32_t> idx(n);
    for (auto& i : idx) i = uint32_t(rng.below(n));
    Tree tree;
    tree.reserve(2 * n / size_t(std::max(1, opt_.min_leaf)) + 1);
    grow(tree, idx, 0, n, 0, rng);
    trees_.push_back(std::move(tree));
  }
  x_ = nullptr, y_ = nullptr;
}

int RandomForest::grow(Tree& t, std::vector<uint32_t>& idx, size_t lo, size_t hi, int depth, Rng& rng) {
  const std::vector<float>& x = *x_;
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
  float best_thr = 0;
  double best_sse = sse * (1 - 1e-9);
  for (size_t k = 0; k < tries && k < d_; ++k) {
    const size_t f = features_[k];
    scratch_.clear();
    for (size_t i = lo; i < hi; ++i) scratch_.emplace_back(x[size_t(idx[i]) * d_ + f], y[idx[i]]);
    std::sort(scratch_.begin(), scratch_.end());
    if (scratch_.front().first == scratch_.back().first) continue;
    double ls = 0, lq = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      ls += scratch_[i].second, lq += scratch_[i].second * scratch_[i].second;
      const size_t nl = i + 1, nr = n - nl;
      if (nl < min_leaf || nr < min_leaf || scratch_[i].first == scratch_[i + 1].first) continue;
      const double rs = sum - ls, rq = sq - lq;
      const double s = (lq - ls * ls / double(nl)) + (rq - rs * rs / double(nr));
      if (s < best_sse) {
        best_sse = s;
        best_f = int(f);
        best_thr = 0.5f * (scratch_[i].first + scratch_[i + 1].first);
      }
    }
  }
  if (best_f < 0) return me;
  auto mid = std::partition(idx.begin() + long(lo), idx.begin() + long(hi),
                            [&](uint32_t i) { return x[size_t(i) * d_ + size_t(best_f)] < best_thr; });
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
