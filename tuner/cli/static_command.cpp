#include <cstdio>

#include "common/error.h"
#include "tuner/cli/commands.h"

#if QTUNE_HAVE_STATIC_COMMAND
#include "tuner/compile/static_command.h"
#endif

namespace qt::tune {

int static_command(const std::vector<std::string>& args) {
#if QTUNE_HAVE_STATIC_COMMAND
  return qt::compile::run_static_command(args);
#else
  (void)args;
  throw Error("the static compile-and-prune step (tuner/compile/static_command.h) is not part of this build",
              kExitUnavailable);
#endif
}

}  // namespace qt::tune
