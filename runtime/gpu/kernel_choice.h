#pragma once
// Which kernel runs an op at a shape on this device: a family of kernels_src/ and a point of its space.
// The order of preference:
//   tuned:   the winner the tuning store holds for this device's fingerprint, family and exact shape
//            (across the families serving the op, the fastest);
//   nearest: else the winner of the nearest tuned shape (device/winners' rule), if that point can run here;
//   default: else the first default point that accepts the shape, of the first family in registry order
//            that has one (registry order lists decode GEMVs before GEMMs).
// Choices are made once per (op, weight type, shape) and counted for qrun's verbose line.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/winners/winners.h"
#include "kernels_src/registry/family.h"

namespace qt::rt {

struct KernelChoice {
  enum class Source { Tuned, Nearest, Default };
  const kernels::KernelFamily* family = nullptr;
  kernels::Point point;
  Source source = Source::Default;
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
  // Whether any registered family serves the op and type on this architecture (whatever the shape).
  bool serves(const std::string& op, const WeightType* type) const { return !candidates(op, type).empty(); }

  struct Counts {
    int tuned = 0, nearest = 0, fallback = 0;
  };
  Counts counts() const;
  // "ops: 5 tuned, 2 nearest, 7 default" plus, per choice, "op shape -> family point (source)".
  std::string summary() const;
  std::vector<std::string> details() const;

 private:
  std::vector<const kernels::KernelFamily*> candidates(const std::string& op, const WeightType* type) const;
  std::optional<KernelChoice> tuned(const kernels::KernelFamily& f, const kernels::Shape& shape, double* seconds) const;
  std::shared_ptr<const winners::WinnersTable> table_;
  winners::DeviceFingerprint fingerprint_;
  std::string prefix_;
  int arch_;
  std::map<std::string, KernelChoice> chosen_;  // by op|type|shape key
};

// A stored point's JSON ({"warps": 4, "isa": "avx2"}) as a Point of `f`; nullopt when it is not one (a
// parameter renamed since, a value outside today's space).
std::optional<kernels::Point> point_from_json(const kernels::KernelFamily& f, const nlohmann::json& j);

}  // namespace qt::rt
