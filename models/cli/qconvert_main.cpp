// qconvert: Hugging Face checkpoints -> qtune model files (ajc1, moe3, ak48), file inspection, and
// deterministic synthetic checkpoints.
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: qconvert <command> [options]\n"
    "  convert    --hf DIR --format ajc1|moe3|ak48 --out FILE   Hugging Face checkpoint -> model file\n"
    "  info       FILE                                          header and tensor table as JSON\n"
    "  synthetic  --preset NAME --format ajc1|moe3|ak48|hf --out PATH   deterministic random checkpoint\n"
    "Run `qconvert <command> --help` for the options of a command.\n";

}  // namespace

int main(int argc, char** argv) {
  return qt::run_tool("qconvert", [&]() -> int {
    if (argc < 2) throw qt::Error("missing command (convert, info or synthetic); see qconvert --help");
    const std::string cmd = argv[1];
    std::vector<std::string> rest(argv + 2, argv + argc);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cmd == "convert") return qt::cli::cmd_convert(rest);
    if (cmd == "info") return qt::cli::cmd_info(rest);
    if (cmd == "synthetic") return qt::cli::cmd_synthetic(rest);
    throw qt::Error("unknown command '" + cmd + "' (expected convert, info or synthetic)");
  });
}
