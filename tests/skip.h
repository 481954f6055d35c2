#pragma once
// QTUNE_SKIP(reason): ends the current TEST_CASE as skipped, what Catch2 v3's SKIP does; Catch2 v2 has none.
// A test that needs a GPU (or a driver, or a toolkit file) uses it when none is present instead of returning
// silently, so a machine without one shows the test as not run rather than as a pass.
//
// It records the reason and returns from the TEST_CASE body, so it belongs in that body, before the work
// that needs the missing thing. When the test case ends, the listener in tests/catch_main.cpp prints
// "QTUNE-SKIPPED: <reason>" as a line of its own, and qtune_test (cmake/QtuneTargets.cmake) gives every
// discovered test a SKIP_REGULAR_EXPRESSION for that line, so CTest reports it "***Skipped" and counts it
// among the tests that did not run. The line is left out when an assertion failed before the skip: a
// skip must never hide a failure.
#include <optional>
#include <string>

namespace qt::test {

// Set by QTUNE_SKIP, read and cleared by the listener when the test case ends.
inline std::optional<std::string>& skip_reason() {
  static std::optional<std::string> reason;
  return reason;
}

}  // namespace qt::test

#define QTUNE_SKIP(reason)                             \
  do {                                                 \
    ::qt::test::skip_reason() = std::string(reason);   \
    return;                                            \
  } while (false)
