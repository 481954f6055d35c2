#include "common/result_status.h"

#include "common/error.h"

namespace qt {

namespace {
constexpr const char* kNames[] = {"ok",      "raced_out", "wrong_result", "compile_failed", "resource_failed",
                                  "runtime_error", "crashed", "timeout", "invalid"};
}

const char* status_name(Status s) { return kNames[int(s)]; }

Status parse_status(const std::string& name) {
  for (int i = 0; i < int(sizeof kNames / sizeof kNames[0]); ++i)
    if (name == kNames[i]) return Status(i);
  throw Error("unknown result status '" + name + "'");
}

}  // namespace qt
