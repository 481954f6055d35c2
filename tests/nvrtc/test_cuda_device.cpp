// The cuda device without a usable driver: it reports itself unavailable with a reason and never crashes,
// whether libcuda is missing or is the toolkit's stub library. With a GPU it comes up and describes itself,
// replays captured graphs exactly, times work with events, refuses what capture cannot record, and names
// the call and the CUDA error of a driver failure.
// What a machine cannot exercise (no stub library, no GPU, or a GPU where its absence is the subject) is
// reported skipped through QTUNE_SKIP, never passed.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>

#include "common/error.h"
#include "common/paths.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_driver.h"
#include "tests/emu/graph_step_check.h"
#include "tests/skip.h"

using namespace qt::cuda;
using Catch::Matchers::Contains;
using qt::test::GraphStep;

namespace {

// The toolkit's stub libcuda, under $CUDA_HOME (the GPU run sets it) or the default install path.
std::string stub_library() {
  const char* home = std::getenv("CUDA_HOME");
  return std::string(home && *home ? home : "/usr/local/cuda") + "/lib64/stubs/libcuda.so";
}

}  // namespace

TEST_CASE("a missing driver library makes the driver unavailable with the loader's reason") {
  const DriverApi api = load_driver("/nonexistent/libcuda.so.1");
  CHECK_FALSE(api.available);
  CHECK(api.unavailable_reason.find("no CUDA driver") != std::string::npos);
  CHECK(api.unavailable_reason.find("/nonexistent/libcuda.so.1") != std::string::npos);
  CHECK(api.cuLaunchKernel == nullptr);
}

TEST_CASE("the toolkit's stub libcuda is recognised as not a driver") {
  const std::string stub = stub_library();
  if (!qt::file_exists(stub)) QTUNE_SKIP("no CUDA toolkit stub library at " + stub);
  const DriverApi api = load_driver(stub);
  CHECK_FALSE(api.available);
  CHECK(api.unavailable_reason.find("stub") != std::string::npos);
}

TEST_CASE("the stub loaded for inspection cannot shadow the real driver of this process") {
  const std::string stub = stub_library();
  if (!qt::file_exists(stub)) QTUNE_SKIP("no CUDA toolkit stub library at " + stub);
  CHECK_FALSE(load_driver(stub).available);
  // Whatever the main namespace now resolves libcuda.so.1 to, it is not the stub.
  if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    link_map* map = nullptr;
    REQUIRE(dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0);
    CHECK(std::string(map->l_name).find("stubs") == std::string::npos);
    dlclose(lib);
  }
  // On a GPU machine, the driver that comes up after the stub was inspected is the real one: the H200 run's
  // device tests were skipped because it was not.
  if (!std::getenv("QTUNE_LIBCUDA") && qt::test::skips_are_failures()) CHECK(driver().available);
}

TEST_CASE("with a GPU the cuda device comes up and describes itself") {
  const std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) QTUNE_SKIP("needs a GPU: " + reason);
  CudaDevice dev;
  CHECK(dev.arch() >= 75);
  CHECK(dev.store_fingerprint().arch == "sm_" + std::to_string(dev.arch()));
  CHECK(dev.store_fingerprint().sm_count > 0);
  CHECK(dev.store_fingerprint().bus_width_bits > 0);
}

TEST_CASE("constructing the cuda device without a GPU throws 'unavailable' with a reason") {
  const std::string reason = cuda_unavailable_reason();
  if (reason.empty()) QTUNE_SKIP_WITH_GPU("a usable GPU is present, so the unavailable path cannot be exercised");
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

TEST_CASE("on a GPU, a captured step replayed 3 times gives exactly the values of direct launches") {
  if (!cuda_available()) QTUNE_SKIP("needs a GPU: " + cuda_unavailable_reason());
  CudaDevice dev;
  qt::test::check_graph_replay_matches_direct_launches(dev);
}

TEST_CASE("on a GPU, calls graph capture cannot record throw naming the call, and the capture goes on") {
  if (!cuda_available()) QTUNE_SKIP("needs a GPU: " + cuda_unavailable_reason());
  CudaDevice dev;
  GraphStep g(dev);
  g.reset();
  g.set_step(0);
  auto before = dev.record_event();
  dev.begin_capture();
  // One matcher: Catch2 v2's combined matchers hold references and cannot be returned.
  auto refused = [](const std::string& call) { return Contains(call + " is not allowed during graph capture"); };
  int host = 0;
  CHECK_THROWS_WITH(dev.allocate(16), refused("allocate()"));
  CHECK_THROWS_WITH(dev.free(g.y.ptr()), refused("free()"));
  CHECK_THROWS_WITH(dev.copy_to_device(g.step.ptr(), &host, 4), refused("copy_to_device()"));
  CHECK_THROWS_WITH(dev.copy_to_host(&host, g.step.ptr(), 4), refused("copy_to_host()"));
  CHECK_THROWS_WITH(dev.synchronize(), refused("synchronize()"));
  CHECK_THROWS_WITH(dev.record_event(), refused("record_event()"));
  CHECK_THROWS_WITH(dev.seconds_between(*before, *before), refused("seconds_between()"));
  CHECK_THROWS_WITH(dev.begin_capture(), refused("begin_capture()"));
  g.issue();
  auto graph = dev.end_capture();
  CHECK_THROWS_WITH(dev.end_capture(), Contains("end_capture() without begin_capture()"));
  graph->replay();
  CHECK(g.x.download<int>(GraphStep::kN) == GraphStep::expected(1));
}

TEST_CASE("on a GPU, events time queued work in order and reject a foreign event") {
  if (!cuda_available()) QTUNE_SKIP("needs a GPU: " + cuda_unavailable_reason());
  CudaDevice dev;
  GraphStep g(dev);
  g.reset();
  g.set_step(0);
  auto e0 = dev.record_event();
  for (int i = 0; i < 10; ++i) g.issue();  // 30 launches: far above the events' ~0.5 us resolution
  auto e1 = dev.record_event();
  g.issue();
  auto e2 = dev.record_event();
  const double t01 = dev.seconds_between(*e0, *e1), t02 = dev.seconds_between(*e0, *e2);
  CHECK(t01 > 0.0);
  CHECK(t02 >= t01);
  CHECK(t02 < 60.0);
  struct Foreign : qt::dev::Event {};
  CHECK_THROWS_WITH(dev.seconds_between(*e0, Foreign{}), Contains("not recorded on this device"));
}

TEST_CASE("on a GPU, a driver error names the call and the CUDA error, and the device stays usable") {
  if (!cuda_available()) QTUNE_SKIP("needs a GPU: " + cuda_unavailable_reason());
  CudaDevice dev;
  CHECK_THROWS_WITH(dev.allocate(size_t{1} << 52),
                    Contains("cuMemAlloc of ") && Contains(": CUDA_ERROR_OUT_OF_MEMORY ("));

  // 256 threads pass the device-independent checks, but the kernel is built for at most 64 per block.
  qt::dev::ModuleSource src;
  src.name = "bounded.cu";
  src.source =
      "#include \"kernels_src/common/qt_cuda.h\"\n"
      "__global__ void __launch_bounds__(64) k_bounded(int* x) { x[threadIdx.x] = 1; }\n";
  src.kernels = {"k_bounded"};
  auto module = dev.load_module(src);
  qt::dev::Buffer x(dev, 256 * 4);
  try {
    dev.launch(module->kernel("k_bounded"), {{1}, {256}, 0}, qt::dev::KernelArgs().add(x.ptr()));
    FAIL("the driver accepted 256 threads for a kernel bounded to 64");
  } catch (const qt::Error& e) {
    INFO(e.what());
    CHECK_THAT(std::string(e.what()), Contains("cuLaunchKernel k_bounded grid (1,1,1) block (256,1,1): CUDA_ERROR_"));
    CHECK(e.exit_code() == qt::kExitFailure);
  }
  // Rejected calls leave no sticky error: the device still copies and launches.
  const std::vector<int> v{1, 2, 3, 4};
  qt::dev::Buffer b(dev, v.size() * 4);
  b.upload(v);
  CHECK(b.download<int>(v.size()) == v);
  dev.launch(module->kernel("k_bounded"), {{1}, {64}, 0}, qt::dev::KernelArgs().add(x.ptr()));
  CHECK(x.download<int>(64) == std::vector<int>(64, 1));
}
