#pragma once
// Scratch files of the tuner tests, one set per test process, under <build>/test-tmp/tuner.
#include <unistd.h>

#include <filesystem>
#include <string>
#include "common/paths.h"

namespace qt::test {

// "<build>/test-tmp/tuner/<name>-<pid><ext>": the folder is created, and a file left at that path by an
// earlier run (with a SQLite store's -wal and -shm beside it) is removed.
inline std::string tuner_scratch(const std::string& name, const std::string& ext) {
  const std::string dir = qt::binary_root() + "/test-tmp/tuner";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + "-" + std::to_string(getpid()) + ext;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

}  // namespace qt::test
