// Stand-alone `qtune static` (the same code the qtune CLI dispatches to).
#include <string>
#include <vector>

#include "common/error.h"
#include "tuner/compile/static_command.h"

int main(int argc, char** argv) {
  return qt::run_tool("qtune static", [&] {
    std::vector<std::string> args(argv + 1, argv + argc);
    return qt::compile::run_static_command(args);
  });
}
