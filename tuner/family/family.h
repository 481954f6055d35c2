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
#include "tuner/core/status.h"
#include "tuner/measure/verify.h"

namespace qt::tune {

// Thrown by a candidate to report a classified failure (compile, resources, runtime).
class CandidateError : public std::runtime_error {
 public:
  CandidateError(Status s, const std::string& what) : std::runtime_error(what), status(s) {}
  Status status;
};

// One point at a time on one shape, in the worker: what the measurement protocol drives.
class KernelInstance {
 public:
  virtual ~KernelInstance() = default;
  // Configures/compiles `point`; throws CandidateError(CompileFailed / ResourceFailed).
  virtual void prepare(const nlohmann::json& point) = 0;
  // Runs the prepared point once and returns the measured duration in seconds.
  virtual double run() = 0;
  virtual const float* output() const = 0;
  virtual const std::vector<float>& reference() = 0;  // computed once per instance
  virtual Tolerance tolerance(double ref_rms) const = 0;
  // "" when the last run's output is right, else what is wrong. By default every element against reference()
  // within tolerance(); an instance whose outputs have tolerances of their own checks each against its own.
  virtual std::string verify();
  // Overwrites the device's L2 (a buffer of twice its size) before a timed repetition, queued ahead of the
  // timing events; false when the instance has no device cache to flush (host families use CacheFlusher).
  virtual bool flush_device_cache() { return false; }
};

// An instance checked against its family's CPU reference for the shape: the expected values of every output in
// order, and the first output's tolerance. Subclasses fill out_ on each run.
class ReferencedInstance : public KernelInstance {
 public:
  const float* output() const override { return out_.data(); }
  const std::vector<float>& reference() override { return ref_; }
  Tolerance tolerance(double ref_rms) const override;

 protected:
  // The family's inputs for the shape (seed 1) and its reference on them.
  void make_reference(const kernels::KernelFamily& f, const kernels::Shape& shape);
  kernels::HostBuffers inputs_;
  std::vector<kernels::Expected> expected_;
  std::vector<float> ref_, out_;
};

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
// The fingerprint of the device a worker runs candidates on ("emu": the emulator of `target_sm`; "cuda": the
// GPU as its driver describes it). Called in the worker: the parent never creates a CUDA context, since a
// context does not survive fork(). Throws qt::Error (exit code 3) when there is no such device.
nlohmann::json describe_device(const std::string& kind, int target_sm);

// In the worker: its one device of a kind ("emu", "cuda"), created on first use, after the fork.
dev::Device& worker_device(const std::string& kind);

// Every tunable name for a device kind: "cpu" lists the host families, "emu"/"cuda" the device families.
std::vector<std::string> family_names(const std::string& device);

}  // namespace qt::tune
