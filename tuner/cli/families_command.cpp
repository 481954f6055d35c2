// qtune families: every registered kernel family with what it serves and the size of its space, so a user
// sees what can be tuned before tuning it.
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels_src/registry/registry.h"
#include "tuner/cli/commands.h"

namespace qt::tune {

int families_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::printf("usage: qtune families\n  every kernel family: where it runs, the op it serves, its weight types, "
                "dims and the number of valid points of its space\n");
    return 0;
  }
  if (!args.empty()) throw Error("qtune families takes no arguments, got '" + args[0] + "'");
  std::printf("%-26s %-6s %-18s %-28s %-22s %s\n", "family", "runs", "op", "weight types", "dims", "points");
  for (const kernels::KernelFamily* f : kernels::all_families()) {
    std::string types, dims;
    for (WeightType t : f->weight_types) types += (types.empty() ? "" : ",") + std::string(weight_traits(t).short_name);
    for (const std::string& d : f->dims) dims += (dims.empty() ? "" : ",") + d;
    std::printf("%-26s %-6s %-18s %-28s %-22s %zu\n", f->name.c_str(), f->on_host() ? "cpu" : "device", f->op.c_str(),
                types.empty() ? "-" : types.c_str(), dims.c_str(), kernels::enumerate_points(*f).size());
  }
  return 0;
}

}  // namespace qt::tune
