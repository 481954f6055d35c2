#include "device/plan/verify_point.h"

#include <chrono>
#include <map>
#include <set>

#include "common/error.h"
#include "kernels_src/registry/registry.h"

namespace qt::compile {

VerifyResult verify_point(dev::Device& device, const kernels::KernelFamily& family, const kernels::Point& point,
                          const kernels::ProblemShape& shape, uint64_t seed) {
  const kernels::HostBuffers inputs = family.make_inputs(shape, seed);
  return verify_point_with(device, family, point, shape, inputs, family.reference(shape, inputs));
}

VerifyResult verify_point_with(dev::Device& device, const kernels::KernelFamily& family, const kernels::Point& point,
                               const kernels::ProblemShape& shape, const kernels::HostBuffers& inputs,
                               const std::vector<kernels::Expected>& expected, std::shared_ptr<dev::Module> module) {
  kernels::validate_point(family, point);
  if (std::string why = family.shape_constraint(point, shape); !why.empty())
    throw Error(family.name + " " + kernels::point_key(point) + " cannot run " + kernels::shape_key(shape) + ": " + why);

  if (!module) module = load_family_module(device, family, {point});

  const kernels::LaunchPlan plan = family.plan(point, shape);
  std::map<std::string, dev::Buffer> buffers;
  for (const auto& spec : plan.buffers) {
    dev::Buffer b(device, static_cast<size_t>(spec.bytes()));
    if (spec.role == kernels::BufferSpec::Role::Input) {
      const auto it = inputs.find(spec.name);
      if (it == inputs.end() || int64_t(it->second.size()) != spec.bytes())
        throw Error(family.name + ": generated input '" + spec.name + "' does not match the plan's size", kExitFailure);
      device.copy_to_device(b.ptr(), it->second.data(), it->second.size());
    } else {
      device.memset(b.ptr(), 0xFF, b.bytes());  // NaN garbage: outputs must be fully written
    }
    buffers.emplace(spec.name, std::move(b));
  }

  const auto start = std::chrono::steady_clock::now();
  for (const auto& l : plan.launches) {
    dev::KernelArgs args;
    for (const auto& a : l.args) {
      if (a.kind == kernels::KernelArg::Kind::Buffer) args.add(buffers.at(a.buffer).ptr());
      else args.add(a.value);
    }
    dev::LaunchConfig cfg;
    cfg.grid = {l.grid.x, l.grid.y, l.grid.z};
    cfg.block = {l.block.x, l.block.y, l.block.z};
    cfg.dynamic_smem_bytes = static_cast<uint32_t>(l.dynamic_smem);
    device.launch(module->kernel(l.kernel), cfg, args);
  }
  device.synchronize();
  VerifyResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (const auto& want : expected) {
    const kernels::BufferSpec& spec = plan.buffer(want.buffer);
    std::vector<uint8_t> got(static_cast<size_t>(spec.bytes()));
    device.copy_to_host(got.data(), buffers.at(spec.name).ptr(), got.size());
    std::string msg = kernels::compare_output(spec, got, want);
    if (!msg.empty()) {
      r.message = family.name + " " + kernels::point_key(point) + " on " + kernels::shape_key(shape) + ": " + msg;
      return r;
    }
  }
  r.passed = true;
  return r;
}

std::shared_ptr<dev::Module> load_family_module(dev::Device& device, const kernels::KernelFamily& family,
                                                const std::vector<kernels::Point>& points) {
  dev::ModuleSource src;
  src.name = family.source;
  src.source = kernels::read_family_source(family);
  std::set<std::string> seen;
  for (const auto& p : points)
    for (const auto& k : family.kernels(p))
      if (seen.insert(k).second) src.kernels.push_back(k);
  return device.load_module(src);
}

}  // namespace qt::compile
