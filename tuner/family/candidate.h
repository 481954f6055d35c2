#pragma once
// Evaluating one candidate, and the tuning loop that feeds candidates to a crash-isolated worker.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tuner/core/search.h"
#include "tuner/family/family.h"
#include "tuner/measure/protocol.h"
#include "tuner/worker/worker.h"

namespace qt::tune {

struct CandidateOutcome {
  Status status = Status::Ok;
  Stats stats;  // seconds
  std::string detail;
  bool from_store = false;  // a resumed run's earlier measurement, read back instead of run again (not serialized)
  nlohmann::json to_json() const;
  static CandidateOutcome from_json(const nlohmann::json& j);
};

// The protocol for one candidate (in the worker): prepare, one run checked against the reference, then
// warm-up + timed repetitions with racing against `incumbent`. `flush_bytes` > 0 flushes before every timed
// repetition: the device's L2 where the instance has one (KernelInstance::flush_device_cache), else that
// many bytes of host memory.
CandidateOutcome run_candidate(KernelInstance& inst, const nlohmann::json& point, const MeasureOptions& m,
                               const Stats* incumbent, size_t flush_bytes);

// The worker-side request handler: {"family", "shape", "point", "measure", "incumbent"?, "flush"}.
// Instances are cached per (family, shape) for the worker's lifetime.
std::string handle_candidate_request(const std::string& request);

struct TuneOptions {
  std::string strategy = "best";
  Budget budget{64, -1};
  uint64_t seed = 1;
  double timeout_s = 10;  // per candidate, wall clock, including the reference on first use
  MeasureOptions measure;
  bool flush = false;
  // What is known about the shape's space before the search (another GPU's results from the store, static
  // data); called once the space is built. Unset: nothing.
  std::function<Knowledge(const Space&)> knowledge;
  // A point's outcome measured by an earlier run on this device (a run killed half-way and started again):
  // used as it is, without the worker. Unset, or nullopt: measure it.
  std::function<std::optional<CandidateOutcome>(const nlohmann::json& point)> recorded;
};

struct TuneReport {
  std::vector<int64_t> shape;
  size_t space_size = 0;
  int64_t evaluations = 0;
  std::optional<nlohmann::json> best_point;
  Stats best_stats;
  std::map<std::string, int> status_counts;
  int worker_restarts = 0;
  int64_t resumed = 0;  // outcomes taken from `recorded`
  double seconds = 0;
};

// Called after every evaluated candidate (to store it, show progress).
using CandidateSink = std::function<void(const nlohmann::json& point, const CandidateOutcome& o)>;

TuneReport tune_shape(const Tunable& family, const std::vector<int64_t>& shape, Worker& worker,
                      const TuneOptions& opt, const CandidateSink& sink);

}  // namespace qt::tune
