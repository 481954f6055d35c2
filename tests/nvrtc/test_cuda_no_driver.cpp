// The cuda device where the driver library is missing: constructing it throws one line naming the library,
// with exit code 3 (kExitUnavailable), on every machine, GPU or not. The driver is loaded once per process,
// so this case has an executable of its own and sets $QTUNE_LIBCUDA before anything asks for the driver.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "common/error.h"
#include "device/cuda/cuda_device.h"

using namespace qt::cuda;

TEST_CASE("with QTUNE_LIBCUDA at a missing file, constructing the cuda device throws exit code 3 in one line") {
  const std::string missing = "/nonexistent/qtune-test/libcuda.so.1";
  REQUIRE(::setenv("QTUNE_LIBCUDA", missing.c_str(), 1) == 0);
  try {
    CudaDevice dev;
    FAIL("cuda device constructed from a missing driver library");
  } catch (const qt::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.exit_code() == qt::kExitUnavailable);
    CHECK(what.find("cuda device unavailable") != std::string::npos);
    CHECK(what.find(missing) != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK_FALSE(cuda_available());
}
