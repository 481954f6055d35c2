#include "common/error.h"

#include <cstdio>

namespace qt {

void fail_file(const std::string& path, const std::string& message, int exit_code) {
  throw Error(path + ": " + message, exit_code);
}

void print_tool_error(const char* tool, const std::exception& e) {
  std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
}

}  // namespace qt
