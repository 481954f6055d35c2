#pragma once
// Transfer for strategies that do not read what is known before the run: when another device's times are
// known (Knowledge::prior_time), its fastest points are evaluated first, then the strategy takes over and
// builds on them (genetic puts them in its first generation, ils and annealing start from the best of them).
// The model-based strategy handles the prior itself and is not wrapped.
#include <memory>

#include "tuner/core/search.h"

namespace qt::tune {

class SeededStrategy : public Strategy {
 public:
  SeededStrategy(std::unique_ptr<Strategy> inner, size_t seeds) : inner_(std::move(inner)), seeds_(seeds) {}
  std::string name() const override { return inner_->name(); }
  void plan(const Budget& budget, size_t space_size) override { inner_->plan(budget, space_size); }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) override;

 private:
  std::unique_ptr<Strategy> inner_;
  size_t seeds_;
  size_t proposed_ = 0;
  bool seeding_ = false;
};

// Evaluates `first` (those not seen yet, in order) before anything `inner` proposes: the points a caller
// wants measured whatever the strategy, e.g. a family's default point, which the GPU flow gives every job
// before any job gets a deeper search. Their results are not shown to `inner`, as the prior's seeds are not.
class FirstPointsStrategy : public Strategy {
 public:
  FirstPointsStrategy(std::unique_ptr<Strategy> inner, std::vector<PointId> first)
      : inner_(std::move(inner)), first_(std::move(first)) {}
  std::string name() const override { return inner_->name(); }
  void plan(const Budget& budget, size_t space_size) override { inner_->plan(budget, space_size); }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) override;

 private:
  std::unique_ptr<Strategy> inner_;
  std::vector<PointId> first_;
  size_t next_ = 0;
  bool first_proposed_ = false;
};

// `strategy` itself when nothing is known or it uses the prior on its own, else wrapped to try the prior's
// three fastest points first.
std::unique_ptr<Strategy> seed_from_prior(std::unique_ptr<Strategy> strategy, const Knowledge* known);

}  // namespace qt::tune
