#pragma once
// The kernel sources a GPU run measured, for a test that holds the model to that run's rows. The model times
// a point from what its compile reports (registers, the main loop's instructions), so rows measured on a
// kernel since rewritten must be predicted from the kernel that ran, not today's. A run's copies of the files
// changed since it ran live in tests/tuner/data/measured-kernels/<run>/ (that folder's README says which
// commit they come from); while this object lives, the source root (QTUNE_HOME) is a scratch copy of today's
// kernels_src with those copies laid over it. Host code (plans, the model) stays today's.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "common/paths.h"

namespace qt::test {

class MeasuredKernelSources {
 public:
  explicit MeasuredKernelSources(const std::string& run) {
    namespace fs = std::filesystem;
    const fs::path measured = fs::path(source_root()) / "tests/tuner/data/measured-kernels" / run;
    REQUIRE(fs::is_directory(measured / "kernels_src"));
    root_ = fs::path(binary_root()) / "test-tmp/tuner" / ("measured-kernels-" + run + "-" + std::to_string(getpid()));
    const fs::path& root = root_;
    fs::remove_all(root);
    fs::create_directories(root);
    fs::copy(fs::path(source_root()) / "kernels_src", root / "kernels_src", fs::copy_options::recursive);
    fs::copy(measured / "kernels_src", root / "kernels_src",
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    if (const char* home = std::getenv("QTUNE_HOME")) previous_ = home;
    ::setenv("QTUNE_HOME", root.c_str(), 1);
  }
  ~MeasuredKernelSources() {
    if (previous_) {
      ::setenv("QTUNE_HOME", previous_->c_str(), 1);
    } else {
      ::unsetenv("QTUNE_HOME");
    }
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  MeasuredKernelSources(const MeasuredKernelSources&) = delete;
  MeasuredKernelSources& operator=(const MeasuredKernelSources&) = delete;

 private:
  std::optional<std::string> previous_;
  std::filesystem::path root_;
};

}  // namespace qt::test
