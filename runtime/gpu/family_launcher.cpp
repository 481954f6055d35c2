#include "runtime/gpu/family_launcher.h"

#include "common/error.h"
#include "device/plan/run_plan.h"

namespace qt::rt {

using kernels::BufferSpec;

FamilyLauncher::Prepared& FamilyLauncher::prepare(const KernelChoice& choice, const kernels::Shape& shape) {
  const kernels::KernelFamily& f = *choice.family;
  const std::string point = kernels::point_key(choice.point);
  const std::string key = f.name + "|" + point + "|" + kernels::shape_key(shape);
  if (auto it = prepared_.find(key); it != prepared_.end()) return it->second;
  Prepared p;
  p.plan = f.plan(choice.point, shape);
  auto& module = modules_[f.name + "|" + point];
  if (!module) module = plan::load_family_module(device_, f, {choice.point});
  p.module = module;
  for (const kernels::Launch& l : p.plan.launches) p.kernels.push_back(module->kernel(l.kernel));
  for (const BufferSpec& spec : p.plan.buffers) {
    if (spec.role != BufferSpec::Role::Workspace) continue;
    p.workspaces.emplace(spec.name, dev::Buffer(device_, size_t(std::max<int64_t>(spec.bytes(), 1))));
    workspace_bytes_ += spec.bytes();
  }
  return prepared_.emplace(key, std::move(p)).first->second;
}

void FamilyLauncher::run(const KernelChoice& choice, const kernels::Shape& shape, const Bindings& bindings) {
  Prepared& p = prepare(choice, shape);
  const kernels::KernelFamily& f = *choice.family;
  auto where = [&] { return f.name + " " + kernels::point_key(choice.point) + " at " + kernels::shape_key(shape); };
  std::map<std::string, dev::DevPtr> ptrs;
  for (const BufferSpec& spec : p.plan.buffers) {
    if (spec.role == BufferSpec::Role::Workspace) {
      ptrs[spec.name] = p.workspaces.at(spec.name).ptr();
      continue;
    }
    const auto it = bindings.buffers.find(spec.name);
    if (it == bindings.buffers.end())
      throw Error(where() + ": the op binds no buffer '" + spec.name + "'", kExitFailure);
    if (it->second.bytes < spec.bytes())
      throw Error(where() + ": buffer '" + spec.name + "' holds " + std::to_string(it->second.bytes) +
                      " bytes, the plan needs " + std::to_string(spec.bytes()),
                  kExitFailure);
    ptrs[spec.name] = it->second.ptr;
  }
  for (size_t i = 0; i < p.plan.launches.size(); ++i) {
    const kernels::Launch& l = p.plan.launches[i];
    queue_.launch(p.kernels[i], plan::launch_config(l), plan::launch_args(f, l, ptrs, &bindings.scalars));
  }
}

}  // namespace qt::rt
