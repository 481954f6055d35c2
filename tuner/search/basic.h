#pragma once
#include "tuner/core/search.h"

namespace qt::tune {

class ExhaustiveStrategy : public Strategy {
 public:
  std::string name() const override { return "exhaustive"; }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId, const Observation&, const SearchState&, Rng&) override {}

 private:
  PointId next_ = 0;
};

class RandomStrategy : public Strategy {
 public:
  std::string name() const override { return "random"; }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId, const Observation&, const SearchState&, Rng&) override {}
};

}  // namespace qt::tune
