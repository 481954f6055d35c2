#include "tuner/cli/commands.h"
#include "tuner/static/static_command.h"

namespace qt::tune {

int static_command(const std::vector<std::string>& args) { return qt::compile::run_static_command(args); }

}  // namespace qt::tune
