#pragma once
// `qtune static --gpu sm86 [--kernel F] [--model X.bin] [--points default|all|LIST] ...`: compiles the points
// of the kernel families for one architecture with NVRTC (no GPU needed) and prints each point's
// resources (registers, spills, stack, shared memory, occupancy, pruning verdict, identical-code merges),
// which points can serve each shape the model needs, and the compile time. The qtune CLI dispatches
// `qtune static ...` here with the arguments after "static". With --step it predicts a whole decode step or
// prefill instead (step_command.h).
#include <string>
#include <vector>

namespace qt::compile {

int run_static_command(const std::vector<std::string>& args);

}  // namespace qt::compile
