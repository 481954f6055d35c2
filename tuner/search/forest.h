#pragma once
// A random forest regressor: the surrogate of the model-based strategy. Each tree is grown on a bootstrap
// sample, choosing at every node the best variance-reducing split among a random share of the features
// (split points: between distinct values, or between quantiles when a feature has more than 64, so a node
// costs one pass over its samples per feature rather than a sort);
// the prediction is the mean over trees, and its uncertainty the spread between trees plus the mean spread
// inside the leaves (law of total variance), which expected improvement needs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/rng.h"

namespace qt::tune {

struct ForestOptions {
  int trees = 16;
  int min_leaf = 3;            // samples a leaf keeps at least
  double feature_share = 0.8;  // features tried at each split
  int max_depth = 24;
};

struct Prediction {
  double mean = 0, variance = 0;
};

class RandomForest {
 public:
  explicit RandomForest(ForestOptions o = {}) : opt_(o) {}
  // `x`: n rows of d features, row-major (x[i * d + f]); `y`: n targets. Deterministic for the Rng's state.
  void fit(const std::vector<float>& x, size_t d, const std::vector<double>& y, Rng& rng);
  Prediction predict(const float* row) const;
  bool fitted() const { return !trees_.empty(); }

 private:
  struct Node {
    int feature = -1;  // -1: leaf
    float threshold = 0;
    int left = 0, right = 0;
    double value = 0, variance = 0;
  };
  using Tree = std::vector<Node>;
  int grow(Tree& t, std::vector<uint32_t>& idx, size_t lo, size_t hi, int depth, Rng& rng);
  ForestOptions opt_;
  const std::vector<double>* y_ = nullptr;
  size_t d_ = 0;
  std::vector<Tree> trees_;
  std::vector<std::vector<float>> edges_;  // per feature: split points between bins, ascending
  std::vector<std::vector<float>> lo_, hi_;  // per feature and bin: smallest and largest value in it
  std::vector<uint8_t> bin_;               // [sample * d_ + feature]
  std::vector<double> hist_n_, hist_s_, hist_q_;
  std::vector<size_t> features_;
};

}  // namespace qt::tune
