#pragma once
// Events and graph capture of the `emu` device. The emulator runs every launch to completion before
// launch() returns, so an event is a host clock reading, and a graph is the list of launches and memsets
// issued during capture, replayed through EmuDevice's ordinary launch path with all of its checks.
#include <chrono>
#include <vector>

#include "device/api/device.h"

namespace qt::emu {

class EmuDevice;

// One recorded operation: a launch when `kernel` is set, else a memset.
struct CapturedOp {
  dev::Kernel kernel;
  dev::LaunchConfig cfg;
  dev::KernelArgs args;  // a copy: the caller's KernelArgs may be gone by replay
  dev::DevPtr dst;
  int byte = 0;
  size_t bytes = 0;
};

struct EmuEvent : dev::Event {
  EmuEvent(const EmuDevice* owner_, std::chrono::steady_clock::time_point at_) : owner(owner_), at(at_) {}
  const EmuDevice* const owner;
  const std::chrono::steady_clock::time_point at;
};

class EmuGraph : public dev::Graph {
 public:
  EmuGraph(EmuDevice& device, std::vector<CapturedOp> ops) : device_(device), ops_(std::move(ops)) {}
  void replay() override;
  size_t size() const { return ops_.size(); }

 private:
  EmuDevice& device_;
  std::vector<CapturedOp> ops_;
};

}  // namespace qt::emu
