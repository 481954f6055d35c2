#pragma once
// Strategies wrapped so that some points are evaluated before anything the strategy proposes: another device's
// fastest points (transfer), or the points a caller wants measured whatever the strategy.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tuner/core/search.h"

namespace qt::tune {

// Evaluates the leading points (those not seen yet, in order) before anything `inner` proposes. Their results
// are not shown to `inner`. The list is asked for once, at the first proposal, from the search's state (its
// knowledge exists only then).
class LeadingPointsStrategy : public Strategy {
 public:
  using Leading = std::function<std::vector<PointId>(const SearchState&)>;
  LeadingPointsStrategy(std::unique_ptr<Strategy> inner, Leading leading)
      : inner_(std::move(inner)), leading_(std::move(leading)) {}
  std::string name() const override { return inner_->name(); }
  void plan(const Budget& budget, size_t space_size) override { inner_->plan(budget, space_size); }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) override;

 private:
  std::unique_ptr<Strategy> inner_;
  Leading leading_;
  std::optional<std::vector<PointId>> points_;
  size_t next_ = 0;
  bool leading_proposed_ = false;
};

// Transfer for strategies that do not read what is known before the run: `strategy` itself when nothing is
// known or it uses the prior on its own (the model-based one), else wrapped to try the prior's three fastest
// points first (Knowledge::prior_time); the strategy then builds on them (genetic puts them in its first
// generation, ils and annealing start from the best of them).
std::unique_ptr<Strategy> seed_from_prior(std::unique_ptr<Strategy> strategy, const Knowledge* known);

// `first` before anything `inner` proposes: e.g. a family's default point, which the GPU flow gives every job
// before any job gets a deeper search.
std::unique_ptr<Strategy> first_points(std::unique_ptr<Strategy> inner, std::vector<PointId> first);

}  // namespace qt::tune
