#include "runtime/gpu/kernel_choice.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/error.h"
#include "kernels_src/registry/registry.h"

namespace qt::rt {
namespace {

std::string choice_key(const std::string& op, const WeightType* type, const kernels::Shape& shape) {
  return op + "|" + (type ? weight_type_name(*type) : "-") + "|" + kernels::shape_key(shape);
}

// The point nearest `p` that `f` runs at `shape`: one parameter changed, by the fewest steps along its list.
std::optional<kernels::Point> nearest_running(const kernels::KernelFamily& f, const kernels::Point& p,
                                              const kernels::Shape& shape) {
  std::optional<kernels::Point> best;
  size_t best_steps = SIZE_MAX;
  for (const kernels::Param& param : f.params) {
    const auto at = std::find(param.values.begin(), param.values.end(), p.at(param.name));
    if (at == param.values.end()) continue;
    const size_t i = size_t(at - param.values.begin());
    for (size_t j = 0; j < param.values.size(); ++j) {
      const size_t steps = j > i ? j - i : i - j;
      if (steps == 0 || steps >= best_steps) continue;
      kernels::Point q = p;
      q[param.name] = param.values[j];
      if (kernels::point_runs(f, q, shape).empty()) best = q, best_steps = steps;
    }
  }
  return best;
}

}  // namespace

const char* choice_source_name(KernelChoice::Source s) {
  switch (s) {
    case KernelChoice::Source::Tuned: return "tuned";
    case KernelChoice::Source::Nearest: return "nearest";
    case KernelChoice::Source::Default: return "default";
  }
  return "?";
}

KernelChooser::KernelChooser(std::shared_ptr<const winners::WinnersTable> table, winners::DeviceFingerprint fingerprint,
                             std::string store_prefix, int arch)
    : table_(std::move(table)), fingerprint_(std::move(fingerprint)), prefix_(std::move(store_prefix)), arch_(arch) {}

std::optional<KernelChoice> KernelChooser::tuned(const kernels::KernelFamily& f, const kernels::Shape& shape,
                                                 double* seconds) const {
  if (!table_) return std::nullopt;
  const auto w = table_->lookup(fingerprint_, prefix_ + f.name, f.dtypes, shape.values, f.source_hash);
  if (!w) return std::nullopt;
  const auto point = point_from_json(f, w->point);
  if (!point || !kernels::point_runs(f, *point, shape).empty()) return std::nullopt;
  kernels::Point run = *point;
  if (!w->exact && f.defaults_for) {
    // A nearest shape's winner that is only the default that shape runs (the tune measured nothing faster there)
    // says nothing about this shape, for which the family picks its own. The H200 run of 29 Nov: the grouped
    // wgmma GEMM's default at 8 tokens, lent to 512 and 4096, ran 1.4-2.2x slower than their own default.
    // The family keeps its standing among the candidates (the nearest shape's time): only its point is this
    // shape's own default.
    const std::optional<KernelChoice> there = default_choice(f, f.shape(w->shape), nullptr),
                                      here = default_choice(f, shape, nullptr);
    if (there && here && there->point == *point) run = here->point;
  }
  *seconds = w->median_s;
  return KernelChoice{&f, run, w->exact ? KernelChoice::Source::Tuned : KernelChoice::Source::Nearest, false, ""};
}

std::optional<KernelChoice> KernelChooser::default_choice(const kernels::KernelFamily& f, const kernels::Shape& shape,
                                                         std::vector<std::string>* refusals) const {
  for (const kernels::Point& p : f.default_points(shape)) {
    const std::string reason = kernels::point_runs(f, p, shape);
    if (reason.empty()) return KernelChoice{&f, p, KernelChoice::Source::Default, false, ""};
    if (refusals) refusals->push_back(f.name + " " + kernels::point_key(p) + ": " + reason);
  }
  return std::nullopt;
}

std::optional<KernelChoice> KernelChooser::dispatched(const std::string& op, const WeightType* type,
                                                      const kernels::Shape& shape,
                                                      const std::vector<const kernels::KernelFamily*>& candidates) const {
  // Only batch-shaped ops are dispatched: the first dimension is the batch M.
  if (!table_ || !type || shape.names.empty() || shape.names[0] != "M") return std::nullopt;
  const std::vector<int64_t> rest(shape.values.begin() + 1, shape.values.end());
  const auto entry = table_->dispatch(fingerprint_, op, weight_type_name(*type), rest, shape.values[0]);
  if (!entry) return std::nullopt;
  for (const winners::Ranked& r : entry->ranking) {
    const kernels::KernelFamily* family = nullptr;
    for (const kernels::KernelFamily* f : candidates)
      if (prefix_ + f->name == r.family) family = f;
    if (!family) {
      if (external_ && external_(r.family)) {
        KernelChoice c;
        c.source = KernelChoice::Source::Tuned;
        c.dispatched = true;
        c.external = r.family;
        return c;
      }
      continue;  // measured elsewhere, or a contender this backend does not run
    }
    double seconds = 0;
    std::optional<KernelChoice> c = tuned(*family, shape, &seconds);
    if (!c) c = default_choice(*family, shape, nullptr);
    if (!c) continue;
    c->dispatched = true;
    return c;
  }
  return std::nullopt;
}

std::vector<const kernels::KernelFamily*> KernelChooser::candidates(const std::string& op, const WeightType* type) const {
  std::vector<const kernels::KernelFamily*> out;
  for (const kernels::KernelFamily* f : kernels::all_families()) {
    if (f->on_host() || f->op != op || f->min_sm > arch_) continue;
    if (type && !f->serves(*type)) continue;
    if (!type && !f->weight_types.empty()) continue;
    out.push_back(f);
  }
  return out;
}

std::vector<KernelChoice> KernelChooser::family_defaults(const std::string& op, const WeightType* type,
                                                         const kernels::Shape& shape) const {
  std::vector<KernelChoice> out;
  for (const kernels::KernelFamily* f : candidates(op, type))
    if (std::optional<KernelChoice> c = default_choice(*f, shape, nullptr)) out.push_back(*c);
  return out;
}

const KernelChoice& KernelChooser::choose(const std::string& op, const WeightType* type, const kernels::Shape& shape) {
  const std::string key = choice_key(op, type, shape);
  if (auto it = chosen_.find(key); it != chosen_.end()) return it->second;
  return chosen_.emplace(key, pick(op, type, shape)).first->second;
}

const KernelChoice& KernelChooser::choose_fused(const std::string& op, const std::string& base_op,
                                                const WeightType* type, const kernels::Shape& shape) {
  const std::string key = choice_key(op, type, shape);
  if (auto it = chosen_.find(key); it != chosen_.end()) return it->second;
  std::optional<KernelChoice> base;
  try {
    base = pick(base_op, type, shape);
  } catch (const Error&) {
  }
  if (base && base->family) {
    auto params = [](const kernels::KernelFamily& f) {
      std::vector<std::string> names;
      for (const kernels::Param& p : f.params) names.push_back(p.name);
      return names;
    };
    for (const kernels::KernelFamily* f : candidates(op, type)) {
      if (f->source != base->family->source || params(*f) != params(*base->family)) continue;
      KernelChoice c = *base;
      c.family = f;
      if (kernels::point_runs(*f, c.point, shape).empty()) return chosen_.emplace(key, c).first->second;
      // A point the fused family refuses (its kernel needs more registers): the nearest it runs, one parameter
      // moved by the fewest steps of its value list, as a tuned choice of a neighbouring point.
      if (std::optional<kernels::Point> near = nearest_running(*f, base->point, shape)) {
        c.point = *near;
        if (c.source == KernelChoice::Source::Tuned) c.source = KernelChoice::Source::Nearest;
        return chosen_.emplace(key, c).first->second;
      }
    }
  }
  return choose(op, type, shape);
}

KernelChoice KernelChooser::pick(const std::string& op, const WeightType* type, const kernels::Shape& shape) const {
  const std::vector<const kernels::KernelFamily*> candidates = this->candidates(op, type);
  std::optional<KernelChoice> best = dispatched(op, type, shape, candidates);
  if (best) return *best;
  double best_s = std::numeric_limits<double>::infinity();
  for (const kernels::KernelFamily* f : candidates) {
    double s = 0;
    auto c = tuned(*f, shape, &s);
    if (!c) continue;
    // An exact winner beats any nearest-shape one; among equals, the fastest.
    const bool better = !best || (c->source == KernelChoice::Source::Tuned && best->source != KernelChoice::Source::Tuned) ||
                        (c->source == best->source && s < best_s);
    if (better) best = c, best_s = s;
  }
  if (!best) {
    std::vector<std::string> refusals;
    for (const kernels::KernelFamily* f : candidates)
      if ((best = default_choice(*f, shape, &refusals))) break;
    if (!best) {
      const std::string what = "no kernel family runs op '" + op + "'" +
                               (type ? std::string(" on ") + weight_type_name(*type) : "") + " at " +
                               kernels::shape_key(shape) + " on sm_" + std::to_string(arch_);
      if (candidates.empty()) throw Error(what + " (none is registered for it)", kExitFailure);
      // The model's shape is what no family takes (a group size of 1, say): one line, one example of why.
      std::string families;
      for (size_t i = 0; i < candidates.size(); ++i)
        families += (i == 0 ? "" : i + 1 == candidates.size() ? " and " : ", ") + candidates[i]->name;
      throw Error(what + ": none of the " + std::to_string(refusals.size()) + " default points of " + families +
                      " can" + (refusals.empty() ? "" : " (" + refusals.front() + ")"),
                  kExitBadInput);
    }
  }
  return *best;
}

KernelChooser::Counts KernelChooser::counts() const {
  Counts c;
  for (const auto& [key, choice] : chosen_) {
    switch (choice.source) {
      case KernelChoice::Source::Tuned: ++c.tuned; break;
      case KernelChoice::Source::Nearest: ++c.nearest; break;
      case KernelChoice::Source::Default: ++c.fallback; break;
    }
  }
  return c;
}

std::string KernelChooser::summary() const {
  const Counts c = counts();
  return std::to_string(chosen_.size()) + " op shapes: " + std::to_string(c.tuned) + " tuned, " +
         std::to_string(c.nearest) + " nearest tuned shape, " + std::to_string(c.fallback) + " family default";
}

std::vector<std::string> KernelChooser::details() const {
  std::vector<std::string> out;
  for (const auto& [key, c] : chosen_)
    out.push_back(key + " -> " + (c.family ? c.family->name + " " + kernels::point_key(c.point) : c.external) + " (" +
                  choice_source_name(c.source) + (c.dispatched ? ", measured batch dispatch" : "") + ")");
  return out;
}

}  // namespace qt::rt
