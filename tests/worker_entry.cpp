#include "tests/worker_entry.h"

#include <cstdio>
#include <map>

namespace qt::test {

namespace {

std::map<std::string, qt::tune::WorkerHandler>& workers() {
  static std::map<std::string, qt::tune::WorkerHandler> w;
  return w;
}

}  // namespace

int register_test_worker(const std::string& name, qt::tune::WorkerHandler handler) {
  workers()[name] = std::move(handler);
  return 0;
}

qt::tune::WorkerCommand test_worker(const std::string& name) {
  return qt::tune::self_command({"--qtune-test-worker", name});
}

int serve_test_worker(const std::string& name) {
  const auto it = workers().find(name);
  if (it == workers().end()) {
    std::fprintf(stderr, "no test worker named '%s' in this binary\n", name.c_str());
    return 2;
  }
  return qt::tune::serve_worker_requests(it->second);
}

}  // namespace qt::test
