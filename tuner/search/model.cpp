#include "tuner/search/model.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "tuner/search/initial_design.h"

namespace qt::tune {

namespace {

double normal_pdf(double z) { return 0.3989422804014327 * std::exp(-0.5 * z * z); }
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Expected improvement below `best` of a prediction (minimisation).
double expected_improvement(const Prediction& p, double best) {
  const double sd = std::sqrt(p.variance);
  const double gain = best - p.mean;
  if (sd <= 1e-12) return std::max(0.0, gain);
  const double z = gain / sd;
  return gain * normal_cdf(z) + sd * normal_pdf(z);
}

// Static features whose positive value marks a point as slow before it runs (spilled registers).
bool spill_feature(const std::string& name) { return name.find("spill") != std::string::npos; }

}  // namespace

void ModelStrategy::plan(const Budget& budget, size_t) { budget_evals_ = budget.max_evals; }

const float* ModelStrategy::row(const SearchState& st, PointId id) {
  if (!have_row_[id]) {
    const Space& s = st.space();
    float* r = &rows_[size_t(id) * width_];
    std::vector<float> ranks = rank_coordinates(s, id);
    std::copy(ranks.begin(), ranks.end(), r);
    size_t k = ranks.size();
    if (const Knowledge* kn = st.knowledge()) {
      if (kn->has_features())
        for (double v : kn->features[id]) r[k++] = std::isfinite(v) ? float(v) : -1.0f;
      if (kn->has_prior()) {
        // Unknown or failed on the other device: slower than anything it measured.
        const double t = kn->prior_time[id];
        r[k++] = std::isfinite(t) && t > 0 ? float(std::log(t)) : 1e30f;
      }
    }
    have_row_[id] = true;
  }
  return &rows_[size_t(id) * width_];
}

void ModelStrategy::start(const SearchState& st, Rng& rng) {
  started_ = true;
  const Space& s = st.space();
  const Knowledge* kn = st.knowledge();
  width_ = s.dims() + (kn && kn->has_features() ? kn->feature_names.size() : 0) + (kn && kn->has_prior() ? 1 : 0);
  rows_.assign(s.size() * width_, 0.0f);
  have_row_.assign(s.size(), false);

  size_t varying = 0;
  for (const Param& p : s.params()) varying += p.text.size() > 1;
  size_t n0 = std::clamp<size_t>(2 * varying, size_t(opt_.design_min), size_t(opt_.design_max));
  if (budget_evals_ > 0)
    n0 = std::min(n0, std::max<size_t>(1, size_t(opt_.design_budget_share * double(budget_evals_))));

  std::vector<PointId> seeds;
  if (kn && kn->has_prior()) {
    // The other device's fastest points first: its winner is what copying it across would give.
    for (PointId p : kn->prior_order()) {
      if (seeds.size() >= (n0 + 1) / 2) break;
      if (!st.seen(p)) seeds.push_back(p);
    }
  }
  std::vector<bool> allowed;
  if (kn && kn->has_features()) {
    allowed.assign(s.size(), true);
    for (size_t f = 0; f < kn->feature_names.size(); ++f)
      if (spill_feature(kn->feature_names[f]))
        for (PointId p = 0; p < s.size(); ++p)
          if (kn->features[p][f] > 0) allowed[p] = false;
  }
  std::vector<PointId> design = maximin_design(st, n0 > seeds.size() ? n0 - seeds.size() : 0, seeds, allowed, rng);
  queue_.assign(seeds.begin(), seeds.end());
  queue_.insert(queue_.end(), design.begin(), design.end());
}

void ModelStrategy::refit(const SearchState& st, Rng& rng) {
  const Space& s = st.space();
  const std::vector<PointId>& done = st.order();
  double worst = -INFINITY, best = INFINITY;
  for (PointId p : done)
    if (const Observation* o = st.seen(p); o && o->usable()) {
      worst = std::max(worst, std::log(o->time));
      best = std::min(best, std::log(o->time));
    }
  fitted_at_ = done.size();
  queue_.clear();
  if (!std::isfinite(best)) return;  // nothing measured yet: the caller samples at random
  std::vector<float> x;
  std::vector<double> y;
  x.reserve(done.size() * width_);
  for (PointId p : done) {
    const float* r = row(st, p);
    x.insert(x.end(), r, r + width_);
    const Observation* o = st.seen(p);
    y.push_back(o->usable() ? std::log(o->time) : worst);
  }
  forest_.fit(x, width_, y, rng);

  // Candidates: a random sample of the unseen points, and the unseen neighbours of the best points.
  std::unordered_set<PointId> cand;
  for (int i = 0; i < opt_.candidates; ++i)
    if (auto p = st.random_unseen(rng)) cand.insert(*p);
  std::vector<PointId> ranked_done;
  for (PointId p : done)
    if (st.seen(p)->usable()) ranked_done.push_back(p);
  const size_t top = std::min(ranked_done.size(), size_t(opt_.local_top));
  std::partial_sort(ranked_done.begin(), ranked_done.begin() + long(top), ranked_done.end(),
                    [&](PointId a, PointId b) { return st.seen(a)->time < st.seen(b)->time; });
  for (size_t i = 0; i < top; ++i)
    for (PointId n : s.neighbours(ranked_done[i]))
      if (!st.seen(n)) cand.insert(n);

  std::vector<std::pair<double, PointId>> scored;
  scored.reserve(cand.size());
  for (PointId p : cand) {
    Prediction pr = forest_.predict(row(st, p));
    scored.emplace_back(-expected_improvement(pr, best) + 1e-9 * pr.mean, p);
  }
  std::sort(scored.begin(), scored.end());
  for (const auto& [score, p] : scored) queue_.push_back(p);
}

std::optional<PointId> ModelStrategy::propose(const SearchState& st, Rng& rng) {
  if (!started_) start(st, rng);
  // The design first; after it, refit once enough new evaluations have come in.
  const bool designing = fitted_at_ == 0 && !queue_.empty();
  if (!designing) {
    const size_t n = st.evaluations();
    const size_t step = std::min<size_t>(size_t(opt_.max_batch),
                                         std::max<size_t>(1, size_t(opt_.refit_growth * double(fitted_at_))));
    if (fitted_at_ == 0 || n >= fitted_at_ + step || queue_.empty()) refit(st, rng);
  }
  while (!queue_.empty()) {
    PointId p = queue_.front();
    queue_.pop_front();
    if (!st.seen(p)) return p;
  }
  return st.random_unseen(rng);
}

}  // namespace qt::tune
