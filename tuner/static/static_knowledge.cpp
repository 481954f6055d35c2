#include "tuner/static/static_knowledge.h"

#include <cmath>
#include <map>

#include "common/error.h"

namespace qt::tune {

Knowledge static_knowledge(const nlohmann::json& report, const std::string& family, const Space& space) {
  Knowledge k;
  k.feature_names = {"registers", "spill_bytes", "stack_frame", "shared_memory", "occupancy"};
  k.features.assign(space.size(), std::vector<double>(k.feature_names.size(), NAN));
  const nlohmann::json* fam = nullptr;
  if (report.contains("families") && report["families"].is_array())
    for (const auto& f : report["families"])
      if (f.value("family", "") == family) fam = &f;
  if (!fam) throw Error("the static report has no family '" + family + "'");
  for (const auto& pj : fam->value("points", nlohmann::json::array())) {
    const auto& kernels = pj.value("kernels", nlohmann::json::array());
    if (!pj.contains("point") || !pj["point"].is_object() || kernels.empty()) continue;
    Indices idx(space.dims());
    bool complete = true;
    for (size_t d = 0; d < space.dims() && complete; ++d) {
      auto v = pj["point"].find(space.params()[d].name);
      complete = v != pj["point"].end() && v->is_number();
      if (!complete) break;
      const auto& nums = space.params()[d].numeric;
      size_t i = 0;
      while (i < nums.size() && nums[i] != v->get<double>()) ++i;
      complete = i < nums.size();
      if (complete) idx[d] = uint16_t(i);
    }
    if (!complete) continue;
    auto id = space.find(idx);
    if (!id) continue;  // a point this shape's constraints remove
    const nlohmann::json* worst = nullptr;
    for (const auto& kj : kernels)
      if (!worst || kj.value("occupancy", 0.0) < worst->value("occupancy", 0.0)) worst = &kj;
    const auto& res = worst->value("resources", nlohmann::json::object());
    k.features[*id] = {res.value("registers", 0.0),
                       res.value("spill_stores", 0.0) + res.value("spill_loads", 0.0),
                       res.value("stack_frame", 0.0),
                       res.value("static_smem", 0.0) + worst->value("dynamic_smem", 0.0),
                       worst->value("occupancy", 0.0)};
  }
  return k;
}

}  // namespace qt::tune
