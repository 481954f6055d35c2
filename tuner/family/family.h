#pragma once
// The tuner's view of a kernel family (kernels_src/registry) on one kind of device: its space for a shape
// (parameters and constraints come from the family), and, inside the worker process, instances that run one
// point on the device the request names and expose the output and the family's reference for verification.
// Names are "<device>.<family>": "emu.awq_gemv" and "cuda.awq_gemv" run a device family on the emulator or a
// GPU, "cpu.matvec.q8_0" runs a host family on this CPU.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/api/device.h"
#include "kernels_src/registry/family.h"
#include "tuner/core/space.h"
#include "common/result_status.h"
#include "tuner/measure/verify.h"

namespace qt::tune {

// Thrown by a candidate to report a classified failure (compile, resources, runtime).
class CandidateError : public std::runtime_error {
 public:
  CandidateError(Status s, const std::string& what) : std::runtime_error(what), status(s) {}
  Status status;
};

// What a job's one-time setup cost, in seconds, so a summary can say where a tuning run's time went; none of
// it is charged to a candidate's timeout.
struct SetupCosts {
  double device = 0;     // the device (a GPU context) and its first module load
  double inputs = 0;     // the family's inputs for the shape
  double reference = 0;  // the expected outputs
  double flush = 0;      // the L2-flush buffer
  std::string reference_on = "cpu";  // "cpu", or "device" for a matrix product computed on the device
  // Inputs and references made (computed) or taken from the worker's memo (shared: an earlier job of the same
  // problem and shape, of this family or another, made them).
  int64_t references_computed = 0, references_shared = 0;
  double total() const { return device + inputs + reference + flush; }
  SetupCosts& operator+=(const SetupCosts& o);
  nlohmann::json to_json() const;
  static SetupCosts from_json(const nlohmann::json& j);
};

// One point at a time on one shape, in the worker: what the measurement protocol drives.
class KernelInstance {
 public:
  virtual ~KernelInstance() = default;
  // The job's one-time work before its first candidate: device, inputs, reference, flush buffer. Throws
  // qt::Error when the job cannot run at all.
  virtual SetupCosts setup() = 0;
  // Configures/compiles `point`; throws CandidateError(CompileFailed / ResourceFailed).
  virtual void prepare(const nlohmann::json& point) = 0;
  // Runs the prepared point once on outputs refilled with garbage, and reads them back for verify().
  virtual void run() = 0;
  // One timed repetition: the seconds the device (or the host kernel) measured. Outputs are not read back.
  virtual double time() = 0;
  virtual const float* output() const = 0;
  virtual const std::vector<float>& reference() = 0;  // computed once, by setup()
  virtual Tolerance tolerance(double ref_rms) const = 0;
  // "" when the last run's output is right, else what is wrong. By default every element against reference()
  // within tolerance(); an instance whose outputs have tolerances of their own checks each against its own.
  virtual std::string verify();
  // Overwrites the device's L2 (a buffer of twice its size) before a timed repetition, queued ahead of the
  // timing events; false when the instance has no device cache to flush (host families use CacheFlusher).
  virtual bool flush_device_cache() { return false; }
};

// An instance checked against its family's reference for the shape: the expected values of every output in
// order, and the first output's tolerance. Subclasses fill out_ on each run.
// A problem's inputs for one shape and the reference's expectations of them (every output, and flattened).
struct ReferenceData {
  kernels::HostBuffers inputs;
  std::vector<kernels::Expected> expected;
  std::vector<float> flat;
  size_t bytes() const;
};

class ReferencedInstance : public KernelInstance {
 public:
  const float* output() const override { return out_.data(); }
  const std::vector<float>& reference() override { return data_->flat; }
  Tolerance tolerance(double ref_rms) const override;

 protected:
  // The family's inputs for the shape (seed 1) and its expectations: a large matrix product on `device`
  // (when given and the family describes its reference as one, checked once per worker against the CPU on a
  // small shape), else the family's CPU reference. Made once per worker for a problem and shape, and shared
  // by every job of that problem (reference_memo): families of one problem (family.problem) differ in their
  // kernels only, and none of those kernels takes part in computing it.
  void make_reference(const kernels::KernelFamily& f, const kernels::Shape& shape, dev::Device* device,
                      SetupCosts& costs);
  const kernels::HostBuffers& inputs() const { return data_->inputs; }
  const std::vector<kernels::Expected>& expected() const { return data_->expected; }
  std::shared_ptr<const ReferenceData> data_ = std::make_shared<ReferenceData>();
  std::vector<float> out_;
};

// The small shape on which a worker first checks a family's device reference against the CPU before trusting
// it on large shapes: its first test shape, else its probe shape. A family described outside the registry (a
// cuBLASLt baseline) must carry one too; the H200 run of 29 Nov found the baselines without, every large job
// failing its setup.
const kernels::Shape& device_reference_check_shape(const kernels::KernelFamily& f);

// The worker's memo of references, by problem and shape: the most recently used, up to a byte budget (the
// last one made is always kept). Its counters say how many were made and how many served again.
struct ReferenceMemoStats {
  int64_t computed = 0, shared = 0;
  size_t bytes = 0, entries = 0;
};
ReferenceMemoStats reference_memo_stats();
// Empties the memo and sets its budget (tests; the default is 4 GiB).
void reset_reference_memo(size_t budget_bytes);

class Tunable {
 public:
  // `device`: "cpu" for host families, "emu" or "cuda" for device families. `target_sm` > 0 compiles each point
  // for that architecture with NVRTC first and prunes what its static report rejects (emu and cuda).
  Tunable(const kernels::KernelFamily& family, std::string device, int target_sm = 0);

  std::string name() const { return device_ + "." + family_.name; }
  const std::string& dtypes() const { return family_.dtypes; }
  const std::string& source_hash() const { return family_.source_hash; }
  const kernels::KernelFamily& family() const { return family_; }
  const std::string& device() const { return device_; }
  int target_sm() const { return target_sm_; }

  Space space(const std::vector<int64_t>& shape) const;
  std::unique_ptr<KernelInstance> instantiate(const std::vector<int64_t>& shape) const;
  // Bytes to overwrite between timed repetitions (0 = no flush).
  size_t flush_bytes() const;

  // A JSON point of the space as the family's point (labels mapped back to values).
  kernels::Point to_point(const nlohmann::json& point) const;

 private:
  const kernels::KernelFamily& family_;
  std::string device_;
  int target_sm_;
};

// "emu.awq_gemv", "cpu.matvec.q8_0": the registry family on that device; throws qt::Error naming the known ones.
std::shared_ptr<Tunable> find_family(const std::string& name, int target_sm = 0);
// The fingerprint of the device a worker runs candidates on (its store_fingerprint()). Called in the worker:
// the tuner process never loads the CUDA driver. Throws qt::Error (exit code 3) when there is no such device.
nlohmann::json describe_device(const std::string& kind, int target_sm);

// In the worker: its one device of a kind ("emu": the emulator of `target_sm`, 80 when 0; "cuda": the GPU),
// created on first use.
dev::Device& worker_device(const std::string& kind, int target_sm = 0);

// Every tunable name for a device kind: "cpu" lists the host families, "emu"/"cuda" the device families.
std::vector<std::string> family_names(const std::string& device);

}  // namespace qt::tune
