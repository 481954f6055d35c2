#pragma once
// The search loop shared by every strategy: strategies propose points (ask/tell), the loop evaluates each
// distinct point once through an Objective, charges the budget (evaluations and/or simulated seconds), and
// records the best-so-far trace used for efficiency curves.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/rng.h"
#include "tuner/core/knowledge.h"
#include "tuner/core/space.h"
#include "common/result_status.h"

namespace qt::tune {

// The store's result vocabulary (common/result_status.h), the tuner's own.
using qt::Status;

struct Observation {
  Status status = Status::Ok;
  double time = 0;     // objective (lower is better); meaningful when has_time(status)
  double cost_s = 0;   // seconds this evaluation cost (compile + verify + benchmark), charged to a time budget
  std::string detail;  // error text, diff statistics, ...
  bool usable() const { return status == Status::Ok; }
  double score() const { return usable() ? time : std::numeric_limits<double>::infinity(); }
};

class Objective {
 public:
  virtual ~Objective() = default;
  virtual Observation evaluate(PointId id) = 0;
};

struct Budget {
  int64_t max_evals = -1;     // distinct evaluations; -1 = unlimited
  double max_seconds = -1;    // charged seconds; -1 = unlimited
};

// What strategies may read about the run so far.
class SearchState {
 public:
  explicit SearchState(const Space& s, const Knowledge* known = nullptr) : space_(&s), known_(known) {}
  const Space& space() const { return *space_; }
  // What was known before the run (static data, another device's times); nullptr when nothing.
  const Knowledge* knowledge() const { return known_; }
  const Observation* seen(PointId id) const {
    auto it = seen_.find(id);
    return it == seen_.end() ? nullptr : &it->second;
  }
  size_t evaluations() const { return order_.size(); }
  const std::vector<PointId>& order() const { return order_; }
  std::optional<PointId> best() const { return best_; }
  double best_score() const { return best_ ? seen_.at(*best_).score() : std::numeric_limits<double>::infinity(); }
  double seconds() const { return seconds_; }
  // A uniformly random point not yet evaluated (nullopt when all are).
  std::optional<PointId> random_unseen(Rng& rng) const;

  void record(PointId id, const Observation& o);

 private:
  const Space* space_;
  const Knowledge* known_;
  std::unordered_map<PointId, Observation> seen_;
  std::vector<PointId> order_;
  std::optional<PointId> best_;
  double seconds_ = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // Called once before the search with the budget and the space size, so a strategy can size itself.
  virtual void plan(const Budget& budget, size_t space_size) {
    (void)budget;
    (void)space_size;
  }
  // Next point to evaluate; nullopt when the strategy has nothing more to try.
  virtual std::optional<PointId> propose(const SearchState& st, Rng& rng) = 0;
  // Result of a point this strategy proposed (also for points already evaluated earlier).
  virtual void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) = 0;
};

struct TracePoint {
  int64_t evaluations;
  double seconds;
  double best;  // best score so far (inf if none)
};

struct SearchResult {
  std::optional<PointId> best;
  double best_score = std::numeric_limits<double>::infinity();
  std::vector<TracePoint> trace;  // one entry per distinct evaluation
  int64_t evaluations = 0;
  double seconds = 0;
  bool budget_exhausted = false;
};

// Runs `strategy` until the budget is spent, the space is exhausted, or the strategy stops. A strategy that
// keeps proposing evaluated points is given a random unseen point after a while (stagnation guard), so
// every run makes progress. An evaluation whose charged time would overrun a time budget is not recorded,
// so the charged seconds never exceed the budget (as a replayed run that stops before it).
// `known` (optional) is handed to the strategy through SearchState::knowledge().
SearchResult run_search(const Space& space, Strategy& strategy, Objective& objective, const Budget& budget,
                        uint64_t seed, const Knowledge* known = nullptr);

}  // namespace qt::tune
