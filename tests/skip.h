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
//
// On a machine that must run everything (QTUNE_REQUIRE_GPU=1, which the GPU run sets: scripts/gpu/run.sh), a
// skip is a failure naming its reason: a GPU test that finds no GPU there has found a bug.
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace qt::test {

// Set by QTUNE_SKIP, read and cleared by the listener when the test case ends.
inline std::optional<std::string>& skip_reason() {
  static std::optional<std::string> reason;
  return reason;
}

inline bool skips_are_failures() {
  const char* v = std::getenv("QTUNE_REQUIRE_GPU");
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace qt::test

// For the few tests whose subject is the absence of a GPU: on a GPU machine they cannot run, and that is no
// failure even there.
#define QTUNE_SKIP_WITH_GPU(reason)                  \
  do {                                               \
    ::qt::test::skip_reason() = std::string(reason); \
    return;                                          \
  } while (false)

#define QTUNE_SKIP(reason)                                                                              \
  do {                                                                                                  \
    if (::qt::test::skips_are_failures())                                                               \
      FAIL("QTUNE_REQUIRE_GPU=1, so this test must run, but it would skip: " << std::string(reason)); \
    ::qt::test::skip_reason() = std::string(reason);                                                    \
    return;                                                                                             \
  } while (false)
