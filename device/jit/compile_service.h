#pragma once
// Compiles parameter points of a kernel family for a GPU architecture with NVRTC: one program per point
// (points that need the same name expressions share it), in parallel on a thread pool, through the
// on-disk cache. Each point then gets its ptxas resources, its occupancy on the target, a pruning verdict
// (spills, no block fits) and the first earlier point whose machine code is identical (measure once, fan
// out).
#include <memory>
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"
#include "device/arch/arch_limits.h"
#include "device/jit/nvrtc_compiler.h"

namespace qt::compile {

struct ServiceOptions {
  std::string cache_dir;           // "" = default_cache_dir()
  bool use_cache = true;
  int threads = 0;                 // 0 = hardware concurrency
  std::vector<std::string> extra_options;  // appended to every NVRTC invocation
};

struct KernelReport {
  std::string name_expression;
  std::string lowered_name;
  KernelResources resources;
  int block_threads = 0;       // from the family's launch plan
  int64_t dynamic_smem = 0;
  Occupancy occupancy;
};

struct PointResult {
  kernels::Point point;
  int sm = 0;
  std::string error;   // compile failure (then nothing below is set)
  std::string pruned;  // why the point should not be measured on this architecture; "" = keep
  bool cache_hit = false;
  double seconds = 0;  // wall time to produce the CUBIN (compile, or cache load on a hit)
  std::string cubin_sha256, code_sha256;
  std::string same_code_as;  // point_key of the first point with identical machine code, "" if none
  std::vector<KernelReport> kernels;
  std::shared_ptr<const std::vector<uint8_t>> cubin;
  bool ok() const { return error.empty(); }
  const KernelReport& kernel(const std::string& name_expression) const;
};

class CompileService {
 public:
  explicit CompileService(ServiceOptions options = {});

  // Compiles `points` (all validated against the family) for sm; results are in the order of `points`.
  // Compile errors are recorded per point, not thrown; an architecture the family does not support is.
  std::vector<PointResult> compile(const kernels::KernelFamily& family, const std::vector<kernels::Point>& points,
                                   int sm);

  // One request through the cache. `hit` (optional) tells whether it came from the cache.
  CompileOutput compile_cached(const CompileRequest& req, bool* hit = nullptr);

  // The NVRTC request for one point of a family.
  CompileRequest request_for(const kernels::KernelFamily& family, const kernels::Point& point, int sm) const;

  const ServiceOptions& options() const { return options_; }

 private:
  ServiceOptions options_;
};

}  // namespace qt::compile
