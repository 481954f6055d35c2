#include "runtime/cli/device_timer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "common/quantile.h"
#include "device/plan/run_plan.h"
#include "runtime/gpu/device_backend.h"

namespace qt::rt {

bool is_emulator(const dev::Device& d) { return d.store_fingerprint().name == "emu"; }

// A cap on repetitions: a 15 us kernel would take 3,000 of them to reach min_seconds, each with an L2 flush and a
// host wait, about 0.15 s a variant on the H200 (the cap was 2,000), where a median needs far fewer samples.
// The 8B report's ~300 variants then take seconds of timing instead of most of a minute.
constexpr size_t kMaxReps = 300;

double median_of_runs(const KernelBenchOptions& o, const std::function<double()>& run_once) {
  std::vector<double> t;
  double total = 0;
  while ((int(t.size()) < o.min_reps || total < o.min_seconds) && t.size() < kMaxReps) {
    t.push_back(run_once());
    total += t.back();
  }
  return median(t);
}

DeviceTimer::DeviceTimer(dev::Device& d, const KernelBenchOptions& o) : device_(d), options_(o), emu_(is_emulator(d)) {}

double DeviceTimer::time(const std::function<void()>& enqueue) {
  if (emu_) return once(enqueue);
  for (int i = 0; i < 3; ++i) enqueue();
  device_.synchronize();
  return median_of_runs(options_, [&] {
    flusher_.flush(device_);
    return once(enqueue);
  });
}

constexpr int kChainLaunches = 32, kEmuChainLaunches = 2;
constexpr int64_t kMinCopies = 2;

std::string Chain::detail() const {
  return std::to_string(launches) + " launches back to back over " + std::to_string(copies) +
         " copies of the inputs, per launch";
}

Chain chain_for(const dev::Device& d, double bytes_per_copy) {
  const double l2 = double(cuda::l2_bytes(d));
  const int launches = is_emulator(d) ? kEmuChainLaunches : kChainLaunches;
  // More copies than launches would never be read: a copy per launch is as cold as it gets.
  const int64_t copies = bytes_per_copy > 0 ? int64_t(std::ceil(2.0 * l2 / bytes_per_copy)) : launches;
  return {launches, std::clamp(copies, std::min<int64_t>(kMinCopies, launches), int64_t(launches))};
}

double DeviceTimer::per_launch(const Chain& chain, const std::function<void(int64_t copy)>& enqueue) {
  return time([&] {
           for (int i = 0; i < chain.launches; ++i) enqueue(int64_t(i) % chain.copies);
         }) /
         chain.launches;
}

double DeviceTimer::per_launch(const Chain& chain, const kernels::KernelFamily& f, const kernels::Point& p,
                               const kernels::Shape& shape, const kernels::HostBuffers& inputs) {
  std::vector<std::unique_ptr<plan::PlanRun>> runs;
  for (int64_t i = 0; i < chain.copies; ++i) runs.push_back(std::make_unique<plan::PlanRun>(&device_, f, p, shape, inputs));
  return per_launch(chain, [&](int64_t copy) { runs[size_t(copy)]->enqueue(); });
}

double DeviceTimer::once(const std::function<void()>& enqueue) {
  const auto start = device_.record_event();
  enqueue();
  const auto end = device_.record_event();
  return device_.seconds_between(*start, *end);
}

namespace {
std::shared_ptr<const winners::WinnersTable> open_store(const std::string& path) {
  return path.empty() ? nullptr : std::make_shared<winners::WinnersTable>(path);
}
}  // namespace

DeviceBench::DeviceBench(dev::Device& device, const std::string& store_prefix, const KernelBenchOptions& options)
    : fingerprint(device.store_fingerprint()),
      table(open_store(options.tuned_cache)),
      tuned(table, fingerprint, store_prefix, device.arch()),
      defaults(nullptr, fingerprint, store_prefix, device.arch()),
      timer(device, options) {
  try {
    lt = std::make_unique<blas::BlasLt>(device);
  } catch (const Error& e) {
    no_blas = e.what();
  }
  // The tuned rows follow a stored dispatch as the runtime does: a cuBLASLt baseline ranked first is what runs.
  if (lt) accept_store_baselines(tuned, store_prefix);
}

}  // namespace qt::rt
