#include "tuner/family/family.h"

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/error.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/l2_flush.h"
#include "device/emu/emu_device.h"
#include "device/jit/compile_service.h"
#include "device/plan/linear_reference.h"
#include "device/plan/run_plan.h"
#include "device/winners/fingerprint.h"
#include "kernels_src/registry/registry.h"
#include "tuner/family/blas_baselines.h"
#include "tuner/measure/flush.h"

namespace qt::tune {

namespace {

using kernels::PointRejected;

Status status_of(PointRejected::Reason r) {
  switch (r) {
    case PointRejected::Reason::Invalid: return Status::Invalid;
    case PointRejected::Reason::CompileFailed: return Status::CompileFailed;
    case PointRejected::Reason::ResourceFailed: return Status::ResourceFailed;
  }
  return Status::RuntimeError;
}

template <class Work>
void timed(double& seconds, Work&& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class FamilyInstance final : public ReferencedInstance {
 public:
  FamilyInstance(const Tunable& t, const kernels::Shape& shape) : t_(t), shape_(shape) {}

  SetupCosts setup() override {
    SetupCosts c;
    dev::Device* device = nullptr;
    if (!t_.family().on_host())
      timed(c.device, [&] {
        device = &worker_device(t_.device(), t_.target_sm());
        // A GPU context's first module load costs more than later ones and belongs to no candidate.
        if (t_.device() == "cuda") plan::load_linear_sums_module(*device);
      });
    make_reference(t_.family(), shape_, t_.device() == "cuda" ? device : nullptr, c);
    if (device)
      timed(c.flush, [&] {
        flusher_.flush(*device);
        device->synchronize();
      });
    return c;
  }

  void prepare(const nlohmann::json& point) override {
    run_.reset();
    const kernels::Point p = t_.to_point(point);
    point_ = p;
    if (t_.target_sm() > 0 && !t_.family().on_host()) prune_statically(p);
    try {
      dev::Device* device = t_.family().on_host() ? nullptr : &worker_device(t_.device(), t_.target_sm());
      run_ = std::make_unique<plan::PlanRun>(device, t_.family(), p, shape_, inputs());
    } catch (const PointRejected& e) {
      throw CandidateError(status_of(e.reason), e.what());
    }
  }

  void run() override {
    try {
      run_->run();
    } catch (const CandidateError&) {
      throw;
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
  }

  // Between device events around the launches only: outputs are not refilled or read back, since a kernel
  // must be right on any prior contents and its first run was verified.
  double time() override {
    try {
      if (t_.family().on_host()) return run_->run();
      dev::Device& device = worker_device(t_.device(), t_.target_sm());
      const std::unique_ptr<dev::Event> start = device.record_event();
      run_->enqueue();
      const std::unique_ptr<dev::Event> end = device.record_event();
      return device.seconds_between(*start, *end);
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
  }

  // The family states its tolerance with its reference, per output: each is checked against its own.
  std::string verify() override { return plan::compare_outputs(*run_, t_.family(), point_, shape_, expected()); }

  bool flush_device_cache() override {
    if (t_.family().on_host()) return false;
    return flusher_.flush(worker_device(t_.device(), t_.target_sm()));
  }

 private:
  // Static screening on the target GPU: the compile service's ptxas report decides before any run.
  void prune_statically(const kernels::Point& p) {
    static compile::CompileService service;
    const int sm = t_.target_sm();
    std::vector<compile::PointResult> r;
    try {
      r = service.compile(t_.family(), {p}, sm);
    } catch (const std::exception& e) {
      throw CandidateError(Status::CompileFailed, "sm_" + std::to_string(sm) + ": " + e.what());
    }
    if (r.empty()) throw CandidateError(Status::CompileFailed, "the compile service returned nothing");
    if (!r[0].ok()) throw CandidateError(Status::CompileFailed, "sm_" + std::to_string(sm) + ": " + r[0].error);
    if (!r[0].pruned.empty())
      throw CandidateError(Status::ResourceFailed, "pruned on sm_" + std::to_string(sm) + ": " + r[0].pruned);
  }

  const Tunable& t_;
  kernels::Shape shape_;
  kernels::Point point_;
  std::unique_ptr<plan::PlanRun> run_;
  cuda::L2Flusher flusher_;
};

// The MACs of a linear shape (0 when the shape is no M x N x K product).
double linear_macs(const kernels::Shape& shape) {
  try {
    return double(shape["M"]) * double(shape["N"]) * double(shape["K"]);
  } catch (const Error&) {
    return 0;
  }
}

}  // namespace

SetupCosts& SetupCosts::operator+=(const SetupCosts& o) {
  device += o.device, inputs += o.inputs, reference += o.reference, flush += o.flush;
  if (o.reference_on == "device") reference_on = "device";
  references_computed += o.references_computed, references_shared += o.references_shared;
  return *this;
}

nlohmann::json SetupCosts::to_json() const {
  return {{"device", device}, {"inputs", inputs}, {"reference", reference}, {"flush", flush},
          {"reference_on", reference_on}, {"references_computed", references_computed},
          {"references_shared", references_shared}};
}

SetupCosts SetupCosts::from_json(const nlohmann::json& j) {
  SetupCosts c;
  c.device = j.value("device", 0.0);
  c.inputs = j.value("inputs", 0.0);
  c.reference = j.value("reference", 0.0);
  c.flush = j.value("flush", 0.0);
  c.reference_on = j.value("reference_on", std::string("cpu"));
  c.references_computed = j.value("references_computed", int64_t(0));
  c.references_shared = j.value("references_shared", int64_t(0));
  return c;
}

size_t ReferenceData::bytes() const {
  size_t b = flat.size() * sizeof(float);
  for (const auto& [name, bytes] : inputs) b += bytes.size();
  for (const auto& e : expected) b += e.values.size() * sizeof(float);
  return b;
}

namespace {

// Process-wide, in the worker: a job the worker switches back to, or a job of another family of the same
// problem and shape, finds its inputs and reference here instead of making them again.
struct ReferenceMemo {
  struct Entry {
    std::shared_ptr<const ReferenceData> data;
    uint64_t last_use = 0;
  };
  std::map<std::string, Entry> entries;
  size_t budget = size_t(4) << 30;
  uint64_t clock = 0;
  ReferenceMemoStats stats;

  std::shared_ptr<const ReferenceData> find(const std::string& key) {
    auto it = entries.find(key);
    if (it == entries.end()) return nullptr;
    it->second.last_use = ++clock;
    ++stats.shared;
    return it->second.data;
  }

  void insert(const std::string& key, std::shared_ptr<const ReferenceData> data) {
    ++stats.computed;
    stats.bytes += data->bytes();
    entries[key] = Entry{std::move(data), ++clock};
    // Least recently used first, never the entry just made.
    while (stats.bytes > budget && entries.size() > 1) {
      auto oldest = entries.end();
      for (auto it = entries.begin(); it != entries.end(); ++it)
        if (it->first != key && (oldest == entries.end() || it->second.last_use < oldest->second.last_use)) oldest = it;
      stats.bytes -= oldest->second.data->bytes();
      entries.erase(oldest);
    }
    stats.entries = entries.size();
  }
};

ReferenceMemo& reference_memo() {
  static ReferenceMemo memo;
  return memo;
}

}  // namespace

ReferenceMemoStats reference_memo_stats() { return reference_memo().stats; }

void reset_reference_memo(size_t budget_bytes) {
  reference_memo() = ReferenceMemo{};
  reference_memo().budget = budget_bytes;
}

const kernels::Shape& device_reference_check_shape(const kernels::KernelFamily& f) {
  return f.test_shapes.empty() ? f.probe_shape : f.test_shapes.front();
}

void ReferencedInstance::make_reference(const kernels::KernelFamily& f, const kernels::Shape& shape,
                                        dev::Device* device, SetupCosts& costs) {
  // The problem and the shape decide the inputs (seed 1) and the reference; where it was computed does not
  // (both paths are checked against the CPU), so the key leaves it out.
  const std::string key = f.problem_name() + nlohmann::json(shape.values).dump();
  if (auto shared = reference_memo().find(key)) {
    data_ = std::move(shared);
    ++costs.references_shared;
    return;
  }
  auto data = std::make_shared<ReferenceData>();
  timed(costs.inputs, [&] { data->inputs = f.make_inputs(shape, 1); });
  timed(costs.reference, [&] {
    // A product this large takes the CPU seconds to minutes; the device takes milliseconds, once it has shown
    // on the family's first test shape that its sums are the CPU's.
    constexpr double kDeviceReferenceMacs = double(1 << 26);
    if (device && f.linear_operands && linear_macs(shape) >= kDeviceReferenceMacs) {
      static std::set<std::string> checked;  // per worker process and family
      if (!checked.count(f.name)) {
        const std::string wrong = plan::check_device_linear_sums(*device, f, device_reference_check_shape(f));
        if (!wrong.empty()) throw Error("the device reference disagrees with the CPU: " + wrong, kExitFailure);
        checked.insert(f.name);
      }
      data->expected =
          f.linear_expected(shape, data->inputs, plan::device_linear_sums(*device, f.linear_operands(shape, data->inputs)));
      costs.reference_on = "device";
    } else {
      data->expected = f.reference(shape, data->inputs);
    }
  });
  for (const auto& e : data->expected) data->flat.insert(data->flat.end(), e.values.begin(), e.values.end());
  ++costs.references_computed;
  data_ = data;
  reference_memo().insert(key, std::move(data));
}

Tolerance ReferencedInstance::tolerance(double) const {
  if (expected().empty()) return {};
  return {expected()[0].abs_tol, expected()[0].rel_tol};
}

// One device of each kind per worker process, created on first use. The emulator emulates the architecture
// the run targets, so its fingerprint and the kernels' QT_ARCH agree.
dev::Device& worker_device(const std::string& kind, int target_sm) {
  static std::map<std::string, std::unique_ptr<dev::Device>> devices;
  const int arch = target_sm > 0 ? target_sm : 80;
  auto& d = devices[kind == "emu" ? "emu" + std::to_string(arch) : kind];
  if (!d) {
    if (kind == "emu") {
      emu::EmuOptions o;
      o.arch = arch;
      d = std::make_unique<emu::EmuDevice>(o);
    } else if (kind == "cuda") {
      d = std::make_unique<cuda::CudaDevice>();
    } else {
      throw Error("no device of kind '" + kind + "'", kExitFailure);
    }
  }
  return *d;
}

Tunable::Tunable(const kernels::KernelFamily& family, std::string device, int target_sm)
    : family_(family), device_(std::move(device)), target_sm_(target_sm) {
  const bool host = device_ == "cpu";
  if (host != family_.on_host())
    throw Error("kernel family " + family_.name + (family_.on_host() ? " runs on the host (cpu), not on " + device_
                                                                      : " runs on a GPU device (emu or cuda), not on " + device_));
}

Space Tunable::space(const std::vector<int64_t>& shape_values) const {
  const kernels::Shape shape = family_.shape(shape_values);
  std::vector<Param> params;
  for (const auto& p : family_.params) {
    Param q;
    q.name = p.name;
    for (int64_t v : p.values) {
      q.numeric.push_back(double(v));
      const std::string text = kernels::value_text(p, v);
      q.text.push_back(p.labels.empty() ? text : nlohmann::json(text).dump());
    }
    params.push_back(q);
  }
  return Space::cartesian(params, [&](const std::vector<double>& values) {
    kernels::Point p;
    for (size_t i = 0; i < family_.params.size(); ++i) p[family_.params[i].name] = int64_t(values[i]);
    if (family_.point_constraint && !family_.point_constraint(p).empty()) return false;
    return !family_.shape_constraint || family_.shape_constraint(p, shape).empty();
  });
}

kernels::Point Tunable::to_point(const nlohmann::json& j) const {
  kernels::Point p;
  for (const auto& [name, value] : j.items()) {
    if (!value.is_string()) {
      p[name] = value.get<int64_t>();
      continue;
    }
    std::optional<int64_t> v;
    for (const auto& prm : family_.params)
      if (prm.name == name) v = kernels::label_value(prm, value.get<std::string>());
    if (v) p[name] = *v;
    else throw CandidateError(Status::Invalid, family_.name + ": " + name + "=" + value.dump() + " is not a value of the family");
  }
  try {
    kernels::validate_point(family_, p);
  } catch (const Error& e) {
    throw CandidateError(Status::Invalid, e.what());
  }
  return p;
}

std::unique_ptr<KernelInstance> Tunable::instantiate(const std::vector<int64_t>& shape) const {
  if (is_blas_baseline(family_)) return make_blas_instance(family_, device_, family_.shape(shape));
  return std::make_unique<FamilyInstance>(*this, family_.shape(shape));
}

size_t Tunable::flush_bytes() const { return family_.on_host() ? 2 * cpu_last_level_cache_bytes() : 0; }

std::shared_ptr<Tunable> find_family(const std::string& name, int target_sm) {
  const auto dot = name.find('.');
  if (dot == std::string::npos) {
    std::string known;
    for (const char* d : {"cpu", "emu", "cuda"})
      for (const auto& n : family_names(d)) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown kernel family '" + name + "' (names are <device>.<family>: " + known + ")");
  }
  const std::string device = name.substr(0, dot);
  if (device != "cpu" && device != "emu" && device != "cuda")
    throw Error("unknown device '" + device + "' in family name '" + name + "' (cpu, emu or cuda)");
  if (const kernels::KernelFamily* b = find_blas_baseline(name.substr(dot + 1))) {
    if (device == "cpu") throw Error(name + ": the cuBLASLt baselines run on a GPU device (cuda)");
    return std::make_shared<Tunable>(*b, device, target_sm);
  }
  return std::make_shared<Tunable>(kernels::find_family(name.substr(dot + 1)), device, target_sm);
}

nlohmann::json describe_device(const std::string& kind, int target_sm) {
  if (kind != "emu" && kind != "cuda") throw Error("no device of kind '" + kind + "' (emu, cuda)");
  return worker_device(kind, target_sm).store_fingerprint().to_json();
}

std::vector<std::string> family_names(const std::string& device) {
  std::vector<std::string> out;
  for (const kernels::KernelFamily* f : kernels::all_families())
    if (f->on_host() == (device == "cpu")) out.push_back(device + "." + f->name);
  return out;
}

}  // namespace qt::tune
