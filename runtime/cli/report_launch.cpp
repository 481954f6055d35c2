#include "runtime/cli/report_launch.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "device/cuda/cuda_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/memcopy/mem_copy_family.h"
#include "runtime/cli/device_timer.h"

namespace qt::rt {
namespace {

using nlohmann::json;

// About one block per SM of a data-centre GPU (108 on an A100, 132 on an H100/H200): a decode GEMV's grid.
constexpr int64_t kWideGrid = 128;

const char* const kLaunchMethod =
    "mem_copy at its default point with one round of its unrolled 16-byte loads and stores per thread, "
    "launched back to back on one stream: the median time of the chain over its launches, so a figure is one launch plus the "
    "smallest ramp and drain of its grid; graph variants replay the chain captured as one CUDA graph; PDL "
    "variants launch each kernel allowed to start while the previous one runs (qrun --pdl). Compare the "
    "static model's in-stream launch cost (GpuPeaks::stream_launch_us).";

// Sets programmatic dependent launch on or off for its lifetime where the device has it, and puts it back after;
// on() says whether it is on, `why` why it could not be turned on.
class ProgrammaticLaunch {
 public:
  ProgrammaticLaunch(dev::Device& d, bool want) : gpu_(dynamic_cast<cuda::CudaDevice*>(&d)) {
    if (!gpu_) {
      why_ = "the emulator has no programmatic dependent launch";
      return;
    }
    was_on_ = gpu_->programmatic_launch();
    on_ = gpu_->set_programmatic_launch(want, &why_) && want;
  }
  ~ProgrammaticLaunch() {
    if (gpu_) gpu_->set_programmatic_launch(was_on_);
  }
  ProgrammaticLaunch(const ProgrammaticLaunch&) = delete;
  ProgrammaticLaunch& operator=(const ProgrammaticLaunch&) = delete;
  bool on() const { return on_; }
  const std::string& why() const { return why_; }

 private:
  cuda::CudaDevice* gpu_;
  bool was_on_ = false, on_ = false;
  std::string why_;
};

// Seconds per launch of `launches` back-to-back launches of `run`, in the stream or from one captured graph.
double per_launch(dev::Device& device, plan::PlanRun& run, int64_t launches, bool graph, const KernelBenchOptions& o) {
  auto chain = [&] {
    for (int64_t i = 0; i < launches; ++i) run.enqueue();
  };
  std::unique_ptr<dev::Graph> g;
  if (graph) {
    device.begin_capture();
    try {
      chain();
    } catch (...) {
      try {
        device.end_capture();  // the device leaves capture mode whatever the chain did
      } catch (...) {
      }
      throw;
    }
    g = device.end_capture();
  }
  const std::function<void()> enqueue = graph ? std::function<void()>([&] { g->replay(); }) : chain;
  auto once = [&] {
    const auto start = device.record_event();
    enqueue();
    const auto end = device.record_event();
    return device.seconds_between(*start, *end);
  };
  if (is_emulator(device)) return once() / double(launches);
  for (int i = 0; i < 3; ++i) enqueue();
  device.synchronize();
  return median_of_runs(o, once) / double(launches);
}

}  // namespace

json bench_launch_cost(dev::Device& device, const KernelBenchOptions& options) {
  const kernels::KernelFamily& f = kernels::memcopy::copy_family();
  const kernels::Point point = f.default_point();
  const int64_t threads = point.at("threads");
  // The emulator's times mean nothing; a short chain proves the path.
  const int64_t launches = is_emulator(device) ? 2 : 256;
  json rows = json::array();
  for (const int64_t blocks : {int64_t{1}, kWideGrid}) {
    std::fprintf(stderr, "qbench: launch cost, %lld block(s) of %lld threads\n", (long long)blocks, (long long)threads);
    // copy_blocks gives one block per `threads * unroll` vectors: each thread one unrolled round of loads.
    const int64_t vectors = blocks * threads * point.at("unroll");
    const kernels::Shape shape = f.shape({vectors}, "launch");
    kernels::HostBuffers inputs;
    inputs["src"] = std::vector<uint8_t>(size_t(vectors) * 16, 0x5a);
    json variants = json::array();
    auto measure = [&](const std::string& name, bool graph, bool pdl) {
      try {
        // Each launch reads the device's setting, so the chain runs with it as this variant names it.
        const ProgrammaticLaunch programmatic(device, pdl);
        if (pdl && !programmatic.on()) {
          variants.push_back({{"name", name}, {"unavailable", programmatic.why()}});
          return;
        }
        plan::PlanRun run(&device, f, point, shape, inputs);
        variants.push_back({{"name", name},
                            {"seconds", per_launch(device, run, launches, graph, options)},
                            {"detail", f.name + " " + kernels::point_key(point) + ", " + std::to_string(launches) +
                                           " launches"}});
      } catch (const std::exception& e) {
        variants.push_back({{"name", name}, {"unavailable", e.what()}});
      }
    };
    measure("stream", false, false);
    measure("graph", true, false);
    measure("stream + PDL", false, true);
    measure("graph + PDL", true, true);
    rows.push_back({{"blocks", kernels::memcopy::copy_blocks(point, vectors)}, {"threads", threads}, {"launches", launches}, {"variants", variants}});
  }
  return {{"method", kLaunchMethod}, {"rows", rows}};
}

}  // namespace qt::rt
