#pragma once
// One error type for every user-facing failure: a message that names the thing (file, field, value) and
// the process exit code the tools return for it. Tools print `what()` on one line and exit with `exit_code`.
#include <stdexcept>
#include <string>

namespace qt {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,     // runtime failure that is not the input's fault
  kExitBadInput = 2,    // invalid file, flag or value given by the user
  kExitUnavailable = 3  // a device or facility is not present on this machine (e.g. no CUDA driver)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = kExitBadInput)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Error about a file: "<path>: <message>".
[[noreturn]] void fail_file(const std::string& path, const std::string& message, int exit_code = kExitBadInput);

// Runs a tool's body, printing any qt::Error (or other exception) as one line on stderr prefixed by the
// tool name, and returns the exit code. Every executable's main() is `return qt::run_tool("qrun", [&]{...});`.
template <class Body>
int run_tool(const char* tool, Body&& body);

void print_tool_error(const char* tool, const std::exception& e);

template <class Body>
int run_tool(const char* tool, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    print_tool_error(tool, e);
    return e.exit_code();
  } catch (const std::exception& e) {
    print_tool_error(tool, e);
    return kExitFailure;
  }
}

}  // namespace qt
