#include "runtime/cli/tuned_cache.h"

#include <cstdint>
#include <optional>
#include <set>

#include "common/error.h"
#include "device/winners/winners.h"
#include "kernels_src/cpu_matvec/cpu_matvec_family.h"
#include "kernels_src/registry/registry.h"
#include "kernels_src/registry/stored_point.h"
#include "runtime/cli/decode_choice.h"

namespace qt::rt {

std::string apply_tuned_cache(const std::string& path, const ModelWeights& weights, CpuOptions& options,
                              bool keep_threads) {
  namespace cm = kernels::cpu_matvec;
  const winners::DeviceFingerprint device = winners::cpu_fingerprint();
  const winners::WinnersTable table(path);
  const std::string match = winners::match_line(table.match(device), device, path);
  const std::vector<cm::MatvecShape> shapes = cm::model_matvec_shapes(weights);
  int found = 0, exact = 0, unreadable = 0;
  int64_t heaviest = -1, stale = 0;
  std::set<const kernels::KernelFamily*> unserved;  // families with a shape that found no winner
  std::optional<kernels::Point> global;
  for (const cm::MatvecShape& s : shapes) {
    const kernels::KernelFamily& family = kernels::find_family(cm::matvec_family_name(s.type));
    const std::string name = "cpu." + family.name;
    // Only winners measured on this build's sources count: a changed kernel makes older timings meaningless.
    const auto winner = table.lookup(device, name, family.dtypes, s.shape, family.source_hash);
    if (!winner) {
      unserved.insert(&family);
      continue;
    }
    // A stored point this build cannot read (edited by hand, damaged) is skipped and counted, never half used.
    const std::optional<kernels::Point> point = kernels::point_from_json(family, winner->point);
    if (!point) {
      ++unreadable;
      continue;
    }
    ++found;
    exact += winner->exact;
    options.rows_per_task_by_shape[MatvecShapeKey{s.type, s.shape[0], s.shape[1], s.shape[2]}] = point->at("rows_per_task");
    if (s.shape[0] * s.shape[1] > heaviest) {
      heaviest = s.shape[0] * s.shape[1];
      global = point;
    }
  }
  // Counted once per family: its stale rows are why some of its shapes found nothing.
  for (const kernels::KernelFamily* family : unserved)
    for (const auto& st : table.stale("cpu." + family->name, family->source_hash))
      if (st.device_name == device.name) stale += st.rows;
  std::string summary = "tuned cache " + path + ": " + std::to_string(found) + "/" + std::to_string(shapes.size()) +
                        " matmul shapes have a winner for this CPU (" + std::to_string(exact) + " exact, " +
                        std::to_string(found - exact) + " from the nearest tuned shape)";
  if (stale > 0)
    summary += "; ignored " + std::to_string(stale) + " stale results measured on older kernel sources (re-run qtune)";
  if (!match.empty()) summary += "; " + match;
  if (unreadable > 0)
    summary += "; skipped " + std::to_string(unreadable) + " winners whose stored point is not one of this build's "
               "(damaged or edited: qtune store check names them)";
  if (!options.decode_prefetch) {
    const std::vector<DecodeVariant> runnable = decode_variants("cpu", 0);
    if (auto choice = stored_decode_choice(table, device, "cpu.", decode_step_key(weights), runnable)) {
      options.decode_prefetch = choice->variant.prefetch;
      summary += "; " + choice->line;
    }
  }
  if (!global) return summary + "; using the built-in choices";
  // The stored ISA is the matvec family's choice of dot products; the family does not time the Q8_0 GEMM, which
  // comes with the fastest ISA that has those dot products.
  const Isa isa = Isa(global->at("isa"));
  std::string isa_line = isa_name(isa);
  if (isa_supported(isa)) {
    options.isa = fastest_with_dot_products_of(isa);
    if (*options.isa != isa) isa_line = std::string(isa_name(*options.isa)) + " (the tuned " + isa_name(isa) + " dot products)";
  }
  const int threads = int(global->at("threads"));
  if (!keep_threads && threads > 0) options.threads = threads;
  return summary + "; isa " + isa_line + ", " + std::to_string(keep_threads ? options.threads : threads) +
         " threads";
}

}  // namespace qt::rt
