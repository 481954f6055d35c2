#pragma once
// The built qtune run as a user runs it, for the tuner's command-line tests: exit code and merged output.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "common/paths.h"
#include "tuner/worker/worker.h"

namespace qt::test {

struct QtuneRun {
  int rc;
  std::string out;  // stdout and stderr together
};

// The built qtune's worker program: what a tuning run starts for its candidates.
inline qt::tune::WorkerCommand qtune_worker() { return {qt::binary_root() + "/bin/qtune", "worker"}; }

// `env` goes before the command ("QTUNE_LIBCUDA=/nonexistent"), `args` after it.
inline QtuneRun run_qtune(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + qt::binary_root() + "/bin/qtune " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace qt::test
