#pragma once
// Helpers of the fuzz entries (internal to tests/fuzz).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "tests/fuzz/fuzz_entries.h"

namespace qt::fuzz {
namespace detail {

inline std::string_view text_of(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

// Runs `body`; qt::Error is the expected outcome of bad input, every other exception is a finding.
template <typename F>
void expect_clean(const char* target, F&& body) {
  try {
    body();
  } catch (const qt::Error&) {
  } catch (const std::exception& e) {
    throw FuzzFinding(std::string(target) + ": escaped exception that is not qt::Error: " + e.what());
  }
}

// Removes the scratch files when the process exits normally.
struct ScratchFiles {
  std::vector<std::string> paths;
  ~ScratchFiles() {
    std::error_code ec;
    for (const auto& p : paths)
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix, ec);
  }
};

// A per-process scratch file for the parsers that read paths (tmpfs when there is one).
inline std::string scratch_path(const char* name) {
  static ScratchFiles files;
  const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  files.paths.push_back(std::string(dir) + "/qtune-fuzz-" + std::to_string(getpid()) + "-" + name);
  return files.paths.back();
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace detail

}  // namespace qt::fuzz
