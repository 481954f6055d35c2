#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "models/cli/commands.h"
#include "models/formats/model_file.h"

namespace qt::cli {

int cmd_info(const std::vector<std::string>& args) {
  CliArgs a("qconvert info", "Validate a model file and print its header and tensor table as JSON.");
  a.positionals("FILE", "model file (ajc1, moe3 or ak48)", 1);
  if (!a.parse(args)) return 0;
  if (a.positional().empty()) throw Error("missing model file (usage: qconvert info FILE)");
  auto file = ModelFile::open(a.positional()[0]);
  std::printf("%s\n", file->describe().dump(2).c_str());
  return 0;
}

}  // namespace qt::cli
