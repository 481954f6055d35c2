// The cuda device without a usable driver: it reports itself unavailable with a reason and never crashes,
// whether libcuda is missing or is the toolkit's stub library. With a GPU it comes up and describes itself.
// What a machine cannot exercise (no stub library, no GPU, or a GPU where its absence is the subject) is
// reported skipped through QTUNE_SKIP, never passed.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "common/error.h"
#include "common/paths.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_driver.h"
#include "tests/skip.h"

using namespace qt::cuda;

TEST_CASE("a missing driver library makes the driver unavailable with the loader's reason") {
  const DriverApi api = load_driver("/nonexistent/libcuda.so.1");
  CHECK_FALSE(api.available);
  CHECK(api.unavailable_reason.find("no CUDA driver") != std::string::npos);
  CHECK(api.unavailable_reason.find("/nonexistent/libcuda.so.1") != std::string::npos);
  CHECK(api.cuLaunchKernel == nullptr);
}

TEST_CASE("the toolkit's stub libcuda is recognised as not a driver") {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!qt::file_exists(stub)) QTUNE_SKIP("no CUDA toolkit stub library at " + stub);
  const DriverApi api = load_driver(stub);
  CHECK_FALSE(api.available);
  CHECK(api.unavailable_reason.find("stub") != std::string::npos);
}

TEST_CASE("with a GPU the cuda device comes up and describes itself") {
  const std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) QTUNE_SKIP("needs a GPU: " + reason);
  CudaDevice dev;
  CHECK(dev.arch() >= 75);
  CHECK(dev.fingerprint().rfind("cuda/sm", 0) == 0);
}

TEST_CASE("constructing the cuda device without a GPU throws 'unavailable' with a reason") {
  const std::string reason = cuda_unavailable_reason();
  if (reason.empty()) QTUNE_SKIP("a usable GPU is present, so the unavailable path cannot be exercised");
  CHECK_FALSE(cuda_available());
  try {
    CudaDevice dev;
    FAIL("cuda device constructed without a driver");
  } catch (const qt::Error& e) {
    CHECK(e.exit_code() == qt::kExitUnavailable);
    CHECK(std::string(e.what()).find("cuda device unavailable") != std::string::npos);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}
