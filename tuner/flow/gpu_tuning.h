#pragma once
// The GPU tuning flow behind `qtune --model X.bin --gpu smNN`: for every device family that serves the
// model, every shape it needs from that family and every batch bucket (M = 1, 2, 4, ... for families whose
// first dimension is the batch M; the buckets a family's space cannot run are left out), search the space
// in the crash-isolated worker and write every candidate to the store. Candidates are verified against the
// CPU reference before they may win (run_candidate). A run killed half-way, started again with the same
// options, takes the candidates it already measured on this device from the store and goes on from there.
// Last, the measured batch dispatch of each linear shape (which family is fastest in each bucket, and
// where the leader changes) is stored with the winners for the runtime.
//
// The device is the worker's: "cuda" (the GPU, timed with events, L2 flushed between repetitions) or "emu"
// (the emulator: one verified run per point, timings meaningless), so the whole flow runs without a GPU.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/winners/dispatch.h"
#include "models/core/model_config.h"
#include "models/core/weights.h"
#include "tuner/family/candidate.h"
#include "tuner/store/store.h"
#include "tuner/worker/worker.h"

namespace qt::tune {

struct GpuTuningOptions {
  std::string device = "cuda";        // "cuda" or "emu"
  int target_sm = 0;                  // compile and prune for it (0: the device's own)
  // Registry names. Empty: the families the runtime dispatches for the model in its default weight layouts
  // (kernels::dispatched_by_default), each on the model shapes it is dispatched for; {"all"}: every device
  // family serving the model, on all its shapes.
  std::vector<std::string> families;
  std::vector<int64_t> buckets = winners::default_batch_buckets();
  std::string budget = "24";          // per (family, shape, bucket): evaluations or a share of the space
  // Seconds the whole run may take (0: no limit): each job's budget shrinks to share what is left evenly at the
  // run's cost per candidate so far, down to the family's default points; jobs not reached are left for a
  // resumed run.
  double time_limit_s = 0;
  TuneOptions tune;
  int compile_threads = 0;            // NVRTC threads compiling ahead (0: none)
  // The cuBLASLt baselines (blas_baselines.h) timed beside the linear families of their weight type and layout
  // at every shape and bucket, so the stored dispatch can send a bucket to them: cublaslt_f16 for fp16 weights,
  // dequant + cuBLASLt for AWQ (file and frag layouts), INT8 group-wise (frag layout) and Q8_0. On by default
  // on cuda; the emulator has no cuBLAS.
  bool baselines = false;
  // Also tune the fp16 linear families and cuBLASLt at every quantized linear shape (as fp16, G = K): the
  // dispatch `qrun --predequantize` uses.
  bool predequantize = false;
  bool quiet = false;                 // no progress line
  // Store the measured batch dispatch of each linear shape. Experiments do not: a few listed points of some
  // families are no ranking of the families serving a shape.
  bool store_dispatch = true;
};

struct GpuJob {
  std::shared_ptr<Tunable> family;
  std::vector<int64_t> shape;
  int64_t budget = 0;
  bool batched = false;  // the first dimension is the batch M
  // An experiment's points (experiments.h), measured in this order and nothing else; empty: a search.
  std::vector<kernels::Point> listed = {};
  std::vector<std::string> listed_text = {};  // per listed point, what it changes from the default ("default": nothing)
  std::string why = {};                       // the experiment's question
};

// "64x4096x4096x128": a shape as the tuner's lines print it.
std::string shape_text(const std::vector<int64_t>& shape);

// The store row of one measured candidate of `family` at `shape` on `device`.
ResultRow outcome_row(const winners::DeviceFingerprint& device, const Tunable& family, const std::vector<int64_t>& shape,
                      const nlohmann::json& point, const CandidateOutcome& outcome, const std::string& run_id);

// The jobs, family by family, shape by shape, bucket by bucket (the baselines and the predequantized fp16
// shapes last); tune_gpu_jobs visits them in rounds, one job of each family in turn. Throws qt::Error naming an
// unknown family, or when nothing is left to tune.
std::vector<GpuJob> plan_gpu_jobs(const ModelConfig& config, const ModelWeights* weights, const GpuTuningOptions& opt);

// Earlier outcomes in the store of this device, family, sources and shape, by point JSON text: what a resumed
// run does not redo.
std::map<std::string, CandidateOutcome> recorded_outcomes(const Store& store, const winners::DeviceFingerprint& device,
                                                          const Tunable& family, const std::vector<int64_t>& shape);

// Asks the worker (never this process: a CUDA context must be created after fork) for the fingerprint of
// its device. Throws qt::Error with kExitUnavailable, and the reason, when there is no such device.
winners::DeviceFingerprint worker_device_fingerprint(Worker& worker, const std::string& device, int target_sm);

struct GpuTuningResult {
  std::vector<TuneReport> reports;  // one per job
  // Per job: Spearman's rank correlation between the roofline model's times (tuner/static/roofline.h) and the
  // times measured on this device (NaN below 3 measured points; on the emulator the times mean nothing).
  std::vector<double> model_rank_correlation;
  int64_t measured = 0, resumed = 0;
  std::map<std::string, int> statuses;
  // One line per linear shape with a stored dispatch: "linear awq_int4 [N,K,G]: cuda.awq_gemv M<=4, cuda.awq_gemm M>=8".
  std::vector<std::string> dispatch_lines;
  TuneAccounting accounting;
  int unfinished_jobs = 0;  // not started: the time limit was reached
  double seconds = 0;
};

// Tunes `jobs` in two rounds: first every job's default point (every family, shape and bucket measured once),
// then each job's search up to its budget, with the time limit's time left shared among the jobs left. The
// dispatch is stored from whatever was measured, also when the time limit cut the run short. reports are
// one per job, in the order of `jobs` (a job never started: no evaluations).
GpuTuningResult tune_gpu_jobs(const std::vector<GpuJob>& jobs, Store& store, Worker& worker,
                              const winners::DeviceFingerprint& device, const GpuTuningOptions& opt,
                              const std::string& run_id);

}  // namespace qt::tune
