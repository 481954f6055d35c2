#include "runtime/cli/tuned_cache.h"

#include <cstdint>
#include <optional>

#include "common/error.h"
#include "tuner/cpu/cpu_matvec.h"
#include "tuner/family/family.h"
#include "tuner/store/store.h"

namespace qt::rt {

std::string apply_tuned_cache(const std::string& path, const ModelWeights& weights, CpuOptions& options,
                              bool keep_threads) {
  tune::register_cpu_families();
  const tune::DeviceFingerprint device = tune::cpu_fingerprint();
  const tune::Store store(path);
  const std::vector<tune::MatvecShape> shapes = tune::model_matvec_shapes(weights);
  int found = 0, exact = 0;
  int64_t heaviest = -1;
  std::optional<nlohmann::json> global;
  for (const tune::MatvecShape& s : shapes) {
    const auto family = tune::find_family(tune::cpu_matvec_family_name(s.type));
    const auto winner = store.lookup(device, family->name(), family->dtypes(), s.shape);
    if (!winner) continue;
    ++found;
    exact += winner->exact;
    const int64_t rows = winner->point.value("rows_per_task", int64_t(0));
    if (rows > 0) options.rows_per_task_by_shape[MatvecShapeKey{s.type, s.shape[0], s.shape[1], s.shape[2]}] = rows;
    if (s.shape[0] * s.shape[1] > heaviest) {
      heaviest = s.shape[0] * s.shape[1];
      global = winner->point;
    }
  }
  std::string summary = "tuned cache " + path + ": " + std::to_string(found) + "/" + std::to_string(shapes.size()) +
                        " matmul shapes have a winner for this CPU (" + std::to_string(exact) + " exact, " +
                        std::to_string(found - exact) + " from the nearest tuned shape)";
  if (!global) return summary + "; using the built-in choices";
  const std::string isa = global->value("isa", std::string());
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512Vnni}) {
    if (isa == isa_name(i) && i <= detect_isa()) options.isa = i;
  }
  const int threads = global->value("threads", 0);
  if (!keep_threads && threads > 0) options.threads = threads;
  return summary + "; isa " + isa + ", " + std::to_string(keep_threads ? options.threads : threads) + " threads";
}

}  // namespace qt::rt
