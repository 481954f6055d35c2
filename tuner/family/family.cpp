#include "tuner/family/family.h"

#include <map>
#include <mutex>
#include <optional>

#include "common/error.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fingerprint.h"
#include "device/cuda/l2_flush.h"
#include "device/emu/emu_device.h"
#include "device/jit/compile_service.h"
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

class FamilyInstance final : public ReferencedInstance {
 public:
  FamilyInstance(const Tunable& t, const kernels::Shape& shape) : t_(t), shape_(shape) { make_reference(t.family(), shape); }

  void prepare(const nlohmann::json& point) override {
    run_.reset();
    const kernels::Point p = t_.to_point(point);
    point_ = p;
    if (t_.target_sm() > 0 && !t_.family().on_host()) prune_statically(p);
    try {
      dev::Device* device = t_.family().on_host() ? nullptr : &worker_device(t_.device());
      run_ = std::make_unique<plan::PlanRun>(device, t_.family(), p, shape_, inputs_);
    } catch (const PointRejected& e) {
      throw CandidateError(status_of(e.reason), e.what());
    }
  }

  double run() override {
    double seconds = 0;
    try {
      seconds = run_->run();
    } catch (const CandidateError&) {
      throw;
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
    out_.clear();
    for (const auto& e : expected_) {
      const kernels::BufferSpec& spec = run_->plan().buffer(e.buffer);
      const std::vector<uint8_t> raw = run_->output(e.buffer);
      for (size_t i = 0; i < e.values.size() && int64_t(i) < spec.elements; ++i)
        out_.push_back(float(kernels::decode_element(spec.dtype, raw.data(), i)));
    }
    if (out_.size() != ref_.size()) throw CandidateError(Status::RuntimeError, "output size differs from reference");
    return seconds;
  }

  // The family states its tolerance with its reference, per output: each is checked against its own.
  std::string verify() override {
    return plan::compare_outputs(*run_, t_.family(), point_, shape_, expected_);
  }

  bool flush_device_cache() override {
    if (t_.family().on_host()) return false;
    return flusher_.flush(worker_device(t_.device()));
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

}  // namespace

void ReferencedInstance::make_reference(const kernels::KernelFamily& f, const kernels::Shape& shape) {
  inputs_ = f.make_inputs(shape, 1);
  expected_ = f.reference(shape, inputs_);
  for (const auto& e : expected_) ref_.insert(ref_.end(), e.values.begin(), e.values.end());
}

Tolerance ReferencedInstance::tolerance(double) const {
  if (expected_.empty()) return {};
  return {expected_[0].abs_tol, expected_[0].rel_tol};
}

// One device of each kind per worker process, created on first use: after the fork, so a GPU context or the
// emulator's threads never cross it.
dev::Device& worker_device(const std::string& kind) {
  static std::map<std::string, std::unique_ptr<dev::Device>> devices;
  auto& d = devices[kind];
  if (!d) {
    if (kind == "emu") d = std::make_unique<emu::EmuDevice>();
    else if (kind == "cuda") d = std::make_unique<cuda::CudaDevice>();
    else throw Error("no device of kind '" + kind + "'", kExitFailure);
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
  if (kind == "emu") return winners::emu_fingerprint(target_sm > 0 ? target_sm : 80).to_json();
  if (kind != "cuda") throw Error("no device of kind '" + kind + "' (emu, cuda)");
  const auto& gpu = dynamic_cast<const cuda::CudaDevice&>(worker_device("cuda"));
  return cuda::cuda_fingerprint(gpu).to_json();
}

std::vector<std::string> family_names(const std::string& device) {
  std::vector<std::string> out;
  for (const kernels::KernelFamily* f : kernels::all_families())
    if (f->on_host() == (device == "cpu")) out.push_back(device + "." + f->name);
  return out;
}

}  // namespace qt::tune
