#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>

#include "tests/skip.h"
#include "tests/worker_entry.h"

namespace {

// Reports QTUNE_SKIP (tests/skip.h) in the form CTest's SKIP_REGULAR_EXPRESSION looks for. It prints once
// the test case has ended, so that a failure before the skip keeps the test failed.
struct SkipListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    TestEventListenerBase::testCaseStarting(info);
    qt::test::skip_reason().reset();
  }

  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    auto& reason = qt::test::skip_reason();
    if (reason) {
      if (stats.totals.assertions.failed == 0)
        stream << "QTUNE-SKIPPED: " << *reason << " (" << stats.testInfo.name << ")" << std::endl;
      else
        stream << "not skipped, an assertion failed before QTUNE_SKIP: " << *reason << std::endl;
      reason.reset();
    }
    TestEventListenerBase::testCaseEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(SkipListener)

int main(int argc, char** argv) {
  // A tuner worker started by a test of this binary (tests/worker_entry.h), not a test run.
  if (argc == 3 && std::strcmp(argv[1], "--qtune-test-worker") == 0) return qt::test::serve_test_worker(argv[2]);
  return Catch::Session().run(argc, argv);
}
