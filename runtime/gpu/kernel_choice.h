#pragma once
// Which kernel runs an op at a shape on this device: a family of kernels_src/ and a point of its space.
// The order of preference:
//   tuned:   the winner the tuning store holds for this device's fingerprint, family and exact shape
//            (across the families serving the op, the fastest);
//   nearest: else the winner of the nearest tuned shape (device/winners' rule), if that point can run here;
//   default: else the first default point that accepts the shape, of the first family in registry order
//            that has one (registry order lists decode GEMVs before GEMMs).
// Where the store holds a measured batch dispatch for the shape (dims after M, device/winners/dispatch.h),
// the family comes from it instead: the first family of the ranking of the batch's bucket that can run
// here, at its tuned (or nearest-tuned, or default) point. Rankings may name contenders that are no
// registry family (dequant + cuBLAS): accept_external() lets a backend that runs them take such a choice.
// Choices are made once per (op, weight type, shape) and counted for qrun's verbose line.
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "device/winners/winners.h"
#include "kernels_src/registry/family.h"
#include "kernels_src/registry/stored_point.h"

namespace qt::rt {

struct KernelChoice {
  enum class Source { Tuned, Nearest, Default };
  const kernels::KernelFamily* family = nullptr;  // null only for an external choice
  kernels::Point point;
  Source source = Source::Default;
  bool dispatched = false;  // the family was picked by the measured batch dispatch
  std::string external;     // store name of an accepted external contender ("cuda.blas.dequant_f16"), else ""
};

const char* choice_source_name(KernelChoice::Source s);

class KernelChooser {
 public:
  // `table` may be null (no tuning store); `store_prefix` names the device in store family names ("emu.",
  // "cuda."); `arch` filters families by min_sm.
  KernelChooser(std::shared_ptr<const winners::WinnersTable> table, winners::DeviceFingerprint fingerprint,
                std::string store_prefix, int arch);

  // Throws qt::Error naming the op, type and shape when no registered family can run it.
  const KernelChoice& choose(const std::string& op, const WeightType* type, const kernels::Shape& shape);
  // An op that fuses a neighbour into another op's kernel (the norm before a stream GEMV, the residual add after
  // it), chosen by that other op, `base_op`, at the same shape: where base_op's choice is a family of the same
  // kernel source and parameters as one serving `op`, that family at the base's point and with its source (a tuned
  // stream GEMV's schedule: the same loads, the same sums), or at the nearest point it runs (one parameter moved
  // the fewest steps; a tuned source becomes "nearest"); else choose(op) itself.
  const KernelChoice& choose_fused(const std::string& op, const std::string& base_op, const WeightType* type,
                                   const kernels::Shape& shape);
  // Contenders of a measured dispatch that are no registry family are skipped unless `can_run` says this
  // backend runs them; then choose() returns them with family == nullptr and `external` set.
  void accept_external(std::function<bool(const std::string& store_name)> can_run) { external_ = std::move(can_run); }
  const winners::DeviceFingerprint& fingerprint() const { return fingerprint_; }
  // Whether any registered family serves the op and type on this architecture (whatever the shape).
  bool serves(const std::string& op, const WeightType* type) const { return !candidates(op, type).empty(); }
  // Each family that could run the op at this shape on this architecture (the candidates choose() weighs, in
  // registry order) at its first default point that accepts the shape; families none of whose default points
  // do are left out. Nothing is tuned, dispatched or counted: what the default of each family would run.
  std::vector<KernelChoice> family_defaults(const std::string& op, const WeightType* type,
                                            const kernels::Shape& shape) const;

  struct Counts {
    int tuned = 0, nearest = 0, fallback = 0;
  };
  Counts counts() const;
  // "ops: 5 tuned, 2 nearest, 7 default" plus, per choice, "op shape -> family point (source)".
  std::string summary() const;
  std::vector<std::string> details() const;

 private:
  std::vector<const kernels::KernelFamily*> candidates(const std::string& op, const WeightType* type) const;
  KernelChoice pick(const std::string& op, const WeightType* type, const kernels::Shape& shape) const;
  std::optional<KernelChoice> tuned(const kernels::KernelFamily& f, const kernels::Shape& shape, double* seconds) const;
  // `refusals`, when given, collects "family point: why it cannot run the shape" for each default point.
  std::optional<KernelChoice> default_choice(const kernels::KernelFamily& f, const kernels::Shape& shape,
                                             std::vector<std::string>* refusals) const;
  std::optional<KernelChoice> dispatched(const std::string& op, const WeightType* type, const kernels::Shape& shape,
                                         const std::vector<const kernels::KernelFamily*>& candidates) const;
  std::function<bool(const std::string&)> external_;
  std::shared_ptr<const winners::WinnersTable> table_;
  winners::DeviceFingerprint fingerprint_;
  std::string prefix_;
  int arch_;
  std::map<std::string, KernelChoice> chosen_;  // by op|type|shape key
};

using kernels::point_from_json;  // kernels_src/registry/stored_point.h

}  // namespace qt::rt
