#include "tuner/search/strategies.h"

#include "common/error.h"
#include "tuner/search/annealing.h"
#include "tuner/search/bandit.h"
#include "tuner/search/basic.h"
#include "tuner/search/genetic.h"
#include "tuner/search/ils.h"
#include "tuner/search/model.h"

namespace qt::tune {

std::vector<std::string> strategy_names() { return {"exhaustive", "random", "genetic", "annealing", "ils", "bandit", "forest"}; }

// The leave-one-out choice over the eight recorded spaces at 1%, 2% and 5% (highest mean 25th percentile on
// the spaces left in): genetic with every space in hand, and for 7 of the 8 spaces left out
// (results/tuner-search-efficiency.md).
std::string default_strategy_name() { return "genetic"; }

std::unique_ptr<Strategy> make_strategy(const std::string& name) {
  if (name == "best") return make_strategy(default_strategy_name());
  if (name == "exhaustive") return std::make_unique<ExhaustiveStrategy>();
  if (name == "random") return std::make_unique<RandomStrategy>();
  if (name == "genetic") return std::make_unique<GeneticStrategy>();
  if (name == "annealing") return std::make_unique<AnnealingStrategy>();
  if (name == "ils") return std::make_unique<IlsStrategy>();
  if (name == "forest") return std::make_unique<ModelStrategy>();
  if (name == "bandit") {
    std::vector<std::unique_ptr<Strategy>> arms;
    arms.push_back(std::make_unique<IlsStrategy>());
    arms.push_back(std::make_unique<GeneticStrategy>());
    arms.push_back(std::make_unique<AnnealingStrategy>());
    arms.push_back(std::make_unique<RandomStrategy>());
    return std::make_unique<BanditStrategy>(std::move(arms));
  }
  std::string known;
  for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown strategy '" + name + "' (known: " + known + ", best)");
}

}  // namespace qt::tune
