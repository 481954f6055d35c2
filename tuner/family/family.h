#pragma once
// A tunable kernel family: its parameter space for a shape (with constraints), and, inside the worker
// process, instances that run one point of the space on prepared inputs and expose the output and the
// family's reference output for verification.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

class KernelInstance {
 public:
  virtual ~KernelInstance() = default;
  // Configures/compiles `point`; throws CandidateError(CompileFailed / ResourceFailed).
  virtual void prepare(const nlohmann::json& point) = 0;
  // Runs the prepared point once and returns the device-measured duration in seconds.
  virtual double run() = 0;
  virtual const float* output() const = 0;
  virtual const std::vector<float>& reference() = 0;  // computed once per instance
  virtual Tolerance tolerance(double ref_rms) const = 0;
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual std::string name() const = 0;
  virtual std::string dtypes() const = 0;
  virtual std::string source_hash() const = 0;
  virtual std::vector<Param> params(const std::vector<int64_t>& shape) const = 0;
  virtual bool valid(const std::vector<int64_t>& shape, const std::vector<double>& values) const = 0;
  virtual std::unique_ptr<KernelInstance> instantiate(const std::vector<int64_t>& shape) const = 0;
  // Bytes to overwrite between timed repetitions (0 = no flush).
  virtual size_t flush_bytes() const { return 0; }

  Space space(const std::vector<int64_t>& shape) const;
};

// Families known to this process. Registration before a Worker forks makes them known to the worker.
void register_family(std::shared_ptr<KernelFamily> f);
std::shared_ptr<KernelFamily> find_family(const std::string& name);  // throws qt::Error if unknown
std::vector<std::string> family_names();

}  // namespace qt::tune
