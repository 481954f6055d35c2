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

// Where a candidate's time went, in seconds (wall time in the worker).
struct CandidatePhases {
  double compile = 0;  // preparing the point: NVRTC (or its disk cache) and the module load
  double verify = 0;   // the first run and the comparison with the reference
  double measure = 0;  // warm-up, flushes and timed repetitions
  nlohmann::json to_json() const;
  static CandidatePhases from_json(const nlohmann::json& j);
  CandidatePhases& operator+=(const CandidatePhases& o);
};

struct CandidateOutcome {
  Status status = Status::Ok;
  Stats stats;  // seconds
  std::string detail;
  CandidatePhases phases;   // not stored with the result
  bool from_store = false;  // a resumed run's earlier measurement, read back instead of run again (not serialized)
  nlohmann::json to_json() const;
  static CandidateOutcome from_json(const nlohmann::json& j);
};

// The protocol for one candidate (in the worker): prepare, one run checked against the reference, then
// warm-up + timed repetitions with racing against `incumbent`. `flush_bytes` > 0 flushes before every timed
// repetition: the device's L2 where the instance has one (KernelInstance::flush_device_cache), else that
// many bytes of host memory. The instance's setup() must have run.
CandidateOutcome run_candidate(KernelInstance& inst, const nlohmann::json& point, const MeasureOptions& m,
                               const Stats* incumbent, size_t flush_bytes);

// The worker-side request handler (what `qtune worker` serves):
//   {"op": "describe", "device", "target_sm"}      the device's store fingerprint;
//   {"op": "roofline", "family", "shape", "sm", "points"}  the static model's times;
//   {"op": "setup", "family", "target_sm", "shape"}   a job's one-time work (SetupCosts); the worker keeps
//                                                  that job's instance until the next setup;
//   {"family", "target_sm", "shape", "point", "measure", "incumbent"?, "flush"}  one candidate of the job (a
//                                                  job not set up yet is set up first, inside the candidate).
std::string handle_candidate_request(const std::string& request);

struct TuneOptions {
  std::string strategy = "best";
  Budget budget{64, -1};
  uint64_t seed = 1;
  double timeout_s = 10;         // per candidate, wall clock; the job's setup is not part of it
  double setup_timeout_s = 600;  // a job's setup: device, inputs, reference, flush buffer
  MeasureOptions measure;
  bool flush = false;
  // What is known about the shape's space before the search (another GPU's results from the store, static
  // data); called once the space is built. Unset: nothing.
  std::function<Knowledge(const Space&)> knowledge;
  // A point's outcome measured by an earlier run on this device (a run killed half-way and started again):
  // used as it is, without the worker. Unset, or nullopt: measure it.
  std::function<std::optional<CandidateOutcome>(const nlohmann::json& point)> recorded;
  // Points evaluated first, in order, before the strategy's own (within the budget); unset: none.
  std::function<std::vector<PointId>(const Space&)> first_points;
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
  // Accounting: the job's setups (one, more after worker restarts), the candidates' phases, and the wall time
  // of the worker calls beyond them (process starts, pipes, the tuner's own work).
  int setups = 0;
  SetupCosts setup;
  CandidatePhases phases;
  double worker_seconds = 0;
};

// Where a tuning run's time went, summed over its jobs: the summary line of `qtune` on every device.
struct TuneAccounting {
  int64_t candidates = 0;  // evaluated in a worker (resumed ones are not)
  int setups = 0;
  SetupCosts setup;
  CandidatePhases phases;
  double worker_seconds = 0;
  int worker_restarts = 0;
  int64_t compiled_ahead = 0;  // points NVRTC compiled on the tuner's threads while the device measured
  double compile_ahead_seconds = 0;
  int compile_threads = 0;
  void add(const TuneReport& r);
  // "412 candidates in 95.3 s, 4.3 candidates/s; in the worker: compiling 12.1 s, verifying 20.3 s, ..."
  std::string text(double wall_seconds) const;
};

// Called after every evaluated candidate (to store it, show progress).
using CandidateSink = std::function<void(const nlohmann::json& point, const CandidateOutcome& o)>;

TuneReport tune_shape(const Tunable& family, const std::vector<int64_t>& shape, Worker& worker,
                      const TuneOptions& opt, const CandidateSink& sink);

}  // namespace qt::tune
