#pragma once
// Runs a chosen family point at a shape on the backend's buffers: the family's launch plan, built once per
// (family, point, shape), with its buffers bound by name to device addresses the op supplies and its
// workspaces allocated here and kept. The op states how many bytes each bound buffer holds, so a plan that
// expects more than the op has is an error naming both, not an overrun.
#include <map>
#include <memory>
#include <string>

#include "device/api/device.h"
#include "kernels_src/registry/family.h"
#include "runtime/gpu/kernel_choice.h"
#include "runtime/gpu/launch_queue.h"

namespace qt::rt {

struct Bound {
  dev::DevPtr ptr;
  int64_t bytes = 0;
};

struct Bindings {
  std::map<std::string, Bound> buffers;
  std::map<std::string, double> scalars;
  Bindings& buf(const std::string& name, dev::DevPtr p, int64_t bytes) {
    buffers[name] = Bound{p, bytes};
    return *this;
  }
  Bindings& scalar(const std::string& name, double v) {
    scalars[name] = v;
    return *this;
  }
};

class FamilyLauncher {
 public:
  FamilyLauncher(dev::Device& device, LaunchQueue& queue) : device_(device), queue_(queue) {}
  void run(const KernelChoice& choice, const kernels::Shape& shape, const Bindings& bindings);
  int64_t workspace_bytes() const { return workspace_bytes_; }
  size_t modules() const { return modules_.size(); }

 private:
  struct Prepared {
    kernels::LaunchPlan plan;
    std::vector<dev::Kernel> kernels;
    std::map<std::string, dev::Buffer> workspaces;
    std::shared_ptr<dev::Module> module;
  };
  Prepared& prepare(const KernelChoice& choice, const kernels::Shape& shape);

  dev::Device& device_;
  LaunchQueue& queue_;
  std::map<std::string, Prepared> prepared_;
  std::map<std::string, std::shared_ptr<dev::Module>> modules_;
  int64_t workspace_bytes_ = 0;
};

}  // namespace qt::rt
