#pragma once
// Worker programs for tests. A tuner Worker runs a program of its own (fork + exec); a test starts its own
// binary as that program: test_worker("name") is `<this test binary> --qtune-test-worker name`, and
// tests/catch_main.cpp then serves the handler registered under that name instead of running tests.
// Everything the handler needs (a test's scripted kernel family, say) must be set up by the handler itself,
// since the worker shares no state with the test that started it.
//
//   QTUNE_TEST_WORKER(echo_worker, [](const std::string& req) { return "echo:" + req; });
//   qt::tune::Worker w(qt::test::test_worker("echo_worker"));
#include <string>

#include "tuner/worker/worker.h"

namespace qt::test {

// Registers `handler` as the worker `name` (at static initialisation); returns a dummy for the macro.
int register_test_worker(const std::string& name, qt::tune::WorkerHandler handler);
// The command that starts this test binary as the worker `name`.
qt::tune::WorkerCommand test_worker(const std::string& name);
// In tests/catch_main.cpp's main: serves the worker `name` on fds 3 and 4; 2 for an unknown name.
int serve_test_worker(const std::string& name);

}  // namespace qt::test

#define QTUNE_TEST_WORKER(name, ...) \
  static const int qtune_test_worker_##name = ::qt::test::register_test_worker(#name, __VA_ARGS__)
