#include "device/plan/run_plan.h"

#include <chrono>
#include <map>
#include <set>

#include "common/error.h"
#include "kernels_src/registry/registry.h"

namespace qt::plan {

namespace {

using kernels::BufferSpec;
using kernels::KernelArg;
using kernels::PointRejected;

void add_scalar(dev::KernelArgs& args, const kernels::ScalarSpec& spec, double value) {
  switch (spec.dtype) {
    case kernels::DType::F32: args.add(static_cast<float>(value)); return;
    case kernels::DType::I32: args.add(static_cast<int32_t>(value)); return;
    default:
      throw Error("run-time scalar '" + spec.name + "' has type " + kernels::dtype_name(spec.dtype) +
                      "; only f32 and i32 scalars exist",
                  kExitFailure);
  }
}

}  // namespace

dev::KernelArgs launch_args(const kernels::KernelFamily& family, const kernels::Launch& l,
                            const std::map<std::string, dev::DevPtr>& buffers,
                            const std::map<std::string, double>* scalars) {
  dev::KernelArgs args;
  for (const KernelArg& a : l.args) {
    switch (a.kind) {
      case KernelArg::Kind::Buffer: {
        const auto it = buffers.find(a.buffer);
        if (it == buffers.end())
          throw Error(family.name + ": launch " + l.kernel + " names buffer '" + a.buffer + "' that is not bound",
                      kExitFailure);
        args.add(it->second);
        break;
      }
      case KernelArg::Kind::I32: args.add(static_cast<int32_t>(a.integer)); break;
      case KernelArg::Kind::I64: args.add(static_cast<int64_t>(a.integer)); break;
      case KernelArg::Kind::F32: args.add(a.real); break;
      case KernelArg::Kind::Null: args.add(dev::DevPtr{0}); break;
      case KernelArg::Kind::Scalar: {
        const kernels::ScalarSpec& spec = family.scalar(a.buffer);
        if (!scalars) {
          add_scalar(args, spec, spec.test_value);
          break;
        }
        const auto it = scalars->find(a.buffer);
        if (it == scalars->end())
          throw Error(family.name + ": launch " + l.kernel + " needs run-time scalar '" + a.buffer + "', which is not set",
                      kExitFailure);
        add_scalar(args, spec, it->second);
        break;
      }
    }
  }
  return args;
}

dev::LaunchConfig launch_config(const kernels::Launch& l) {
  dev::LaunchConfig cfg;
  cfg.grid = {l.grid.x, l.grid.y, l.grid.z};
  cfg.block = {l.block.x, l.block.y, l.block.z};
  cfg.dynamic_smem_bytes = static_cast<uint32_t>(l.dynamic_smem);
  cfg.cluster = {l.cluster.x, l.cluster.y, l.cluster.z};
  return cfg;
}

PlanRun::PlanRun(dev::Device* device, const kernels::KernelFamily& family, const kernels::Point& point,
                 const kernels::Shape& shape, const kernels::HostBuffers& inputs, std::shared_ptr<dev::Module> module)
    : device_(device), family_(family) {
  kernels::validate_point(family, point);
  if (family.point_constraint)
    if (std::string why = family.point_constraint(point); !why.empty())
      throw PointRejected(PointRejected::Reason::Invalid, why);
  if (family.shape_constraint)
    if (std::string why = family.shape_constraint(point, shape); !why.empty())
      throw PointRejected(PointRejected::Reason::Invalid, family.name + " " + kernels::point_key(point) +
                                                               " cannot run " + kernels::shape_key(shape) + ": " + why);
  plan_ = family.plan(point, shape);
  for (const BufferSpec& spec : plan_.buffers)
    if (spec.role == BufferSpec::Role::InOut && inputs.count(spec.name)) inputs_[spec.name] = inputs.at(spec.name);
  for (const BufferSpec& spec : plan_.buffers) {
    if (!spec.filled_from_inputs()) continue;
    const auto it = inputs.find(spec.name);
    if (it == inputs.end() || int64_t(it->second.size()) != spec.bytes())
      throw Error(family.name + ": input '" + spec.name + "' does not match the plan's size (" +
                      std::to_string(spec.bytes()) + " bytes)",
                  kExitFailure);
  }

  if (family.on_host()) {
    for (const BufferSpec& spec : plan_.buffers)
      host_[spec.name] = spec.filled_from_inputs() ? inputs.at(spec.name)
                                                               : std::vector<uint8_t>(size_t(spec.bytes()), 0xFF);
    host_kernel_ = family.host_prepare(point, shape, host_);
    return;
  }

  if (!device_) throw Error("family " + family.name + " runs on a device, and none was given", kExitFailure);
  if (!module) {
    try {
      module = load_family_module(*device_, family, {point});
    } catch (const Error& e) {
      throw PointRejected(PointRejected::Reason::CompileFailed, e.what());
    }
  }
  module_ = std::move(module);
  for (const BufferSpec& spec : plan_.buffers) {
    dev::Buffer b(*device_, size_t(spec.bytes()));
    if (spec.filled_from_inputs()) device_->copy_to_device(b.ptr(), inputs.at(spec.name).data(), b.bytes());
    buffers_.emplace_back(spec.name, std::move(b));
  }
  std::map<std::string, dev::DevPtr> ptrs;
  for (const auto& [name, b] : buffers_) ptrs[name] = b.ptr();
  for (const kernels::Launch& l : plan_.launches) {
    launches_.emplace_back(module_->kernel(l.kernel), launch_config(l));
    args_.push_back(launch_args(family, l, ptrs));
  }
}

PlanRun::~PlanRun() = default;

// InOut buffers are re-filled from the inputs, so every run starts from the same state.
void PlanRun::reset_outputs() {
  for (const BufferSpec& spec : plan_.buffers) {
    if (spec.role == BufferSpec::Role::Input) continue;
    if (spec.role == BufferSpec::Role::InOut) {
      if (host_kernel_) {
        host_.at(spec.name) = inputs_.at(spec.name);
        continue;
      }
      for (auto& [name, b] : buffers_)
        if (name == spec.name) device_->copy_to_device(b.ptr(), inputs_.at(spec.name).data(), b.bytes());
      continue;
    }
    if (host_kernel_) {
      std::fill(host_.at(spec.name).begin(), host_.at(spec.name).end(), uint8_t(0xFF));
      continue;
    }
    for (auto& [name, b] : buffers_)
      if (name == spec.name) device_->memset(b.ptr(), 0xFF, b.bytes());
  }
}

double PlanRun::run() {
  reset_outputs();
  if (host_kernel_) return host_kernel_->run();
  // Events on the device's stream around the launches only: the output reset queued above, the launch
  // overhead on the host and the final wait are not the kernels' time.
  const std::unique_ptr<dev::Event> start = device_->record_event();
  for (size_t i = 0; i < launches_.size(); ++i) device_->launch(launches_[i].first, launches_[i].second, args_[i]);
  const std::unique_ptr<dev::Event> end = device_->record_event();
  device_->synchronize();
  return device_->seconds_between(*start, *end);
}

void PlanRun::enqueue() {
  if (host_kernel_) throw Error("PlanRun::enqueue: " + family_.name + " runs on the host", kExitFailure);
  for (size_t i = 0; i < launches_.size(); ++i) device_->launch(launches_[i].first, launches_[i].second, args_[i]);
}

dev::DevPtr PlanRun::buffer(const std::string& name) const {
  for (const auto& [n, b] : buffers_)
    if (n == name) return b.ptr();
  throw Error("launch plan of " + family_.name + " has no device buffer '" + name + "'", kExitFailure);
}

std::vector<uint8_t> PlanRun::output(const std::string& buffer) const {
  if (host_kernel_) return host_.at(buffer);
  for (const auto& [name, b] : buffers_)
    if (name == buffer) {
      std::vector<uint8_t> bytes(b.bytes());
      device_->copy_to_host(bytes.data(), b.ptr(), bytes.size());
      return bytes;
    }
  throw Error("launch plan of " + family_.name + " has no buffer '" + buffer + "'", kExitFailure);
}

std::string compare_outputs(const PlanRun& run, const kernels::KernelFamily& family, const kernels::Point& point,
                            const kernels::Shape& shape, const std::vector<kernels::Expected>& expected) {
  for (const kernels::Expected& want : expected) {
    const BufferSpec& spec = run.plan().buffer(want.buffer);
    const std::string msg = kernels::compare_output(spec, run.output(spec.name), want);
    if (!msg.empty()) return family.name + " " + kernels::point_key(point) + " on " + kernels::shape_key(shape) + ": " + msg;
  }
  return "";
}

VerifyResult verify_point(dev::Device* device, const kernels::KernelFamily& family, const kernels::Point& point,
                          const kernels::Shape& shape, uint64_t seed) {
  const kernels::HostBuffers inputs = family.make_inputs(shape, seed);
  return verify_point_with(device, family, point, shape, inputs, family.reference(shape, inputs));
}

VerifyResult verify_point_with(dev::Device* device, const kernels::KernelFamily& family, const kernels::Point& point,
                               const kernels::Shape& shape, const kernels::HostBuffers& inputs,
                               const std::vector<kernels::Expected>& expected, std::shared_ptr<dev::Module> module) {
  PlanRun run(device, family, point, shape, inputs, std::move(module));
  VerifyResult r;
  r.seconds = run.run();
  r.message = compare_outputs(run, family, point, shape, expected);
  r.passed = r.message.empty();
  return r;
}

std::shared_ptr<dev::Module> load_family_module(dev::Device& device, const kernels::KernelFamily& family,
                                                const std::vector<kernels::Point>& points) {
  // An emulator of an older architecture would fail deep in a kernel's static_assert (wgmma needs sm_90a).
  if (device.arch() > 0 && device.arch() < family.min_sm)
    throw Error("kernel family " + family.name + " needs sm_" + std::to_string(family.min_sm) + " or newer; this " +
                    "device is sm_" + std::to_string(device.arch()),
                kExitFailure);
  dev::ModuleSource src;
  src.name = family.source;
  src.source = kernels::read_family_source(family);
  std::set<std::string> seen;
  for (const auto& p : points)
    for (const auto& k : family.kernels(p))
      if (seen.insert(k).second) src.kernels.push_back(k);
  return device.load_module(src);
}

}  // namespace qt::plan
