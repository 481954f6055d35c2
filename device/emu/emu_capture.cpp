#include "device/emu/emu_capture.h"

#include "common/error.h"
#include "device/emu/emu_device.h"

namespace qt::emu {

void EmuGraph::replay() {
  device_.refuse_in_capture("Graph::replay()");
  for (const CapturedOp& op : ops_) {
    if (op.kernel)
      device_.launch(op.kernel, op.cfg, op.args);
    else
      device_.memset(op.dst, op.byte, op.bytes);
  }
}

void EmuDevice::refuse_in_capture(const char* call) const {
  if (capture_)
    throw qt::Error(std::string("emu: ") + call +
                        " is not allowed during graph capture (between begin_capture() and end_capture())",
                    kExitFailure);
}

std::unique_ptr<dev::Event> EmuDevice::record_event() {
  refuse_in_capture("record_event()");
  return std::make_unique<EmuEvent>(this, std::chrono::steady_clock::now());
}

double EmuDevice::seconds_between(const dev::Event& start, const dev::Event& end) {
  refuse_in_capture("seconds_between()");
  const auto* s = dynamic_cast<const EmuEvent*>(&start);
  const auto* e = dynamic_cast<const EmuEvent*>(&end);
  if (!s || !e || s->owner != this || e->owner != this)
    throw qt::Error("emu: seconds_between() of an event not recorded on this device", kExitFailure);
  return std::chrono::duration<double>(e->at - s->at).count();
}

void EmuDevice::begin_capture() {
  refuse_in_capture("begin_capture()");
  capture_.emplace();
}

std::unique_ptr<dev::Graph> EmuDevice::end_capture() {
  if (!capture_) throw qt::Error("emu: end_capture() without begin_capture()", kExitFailure);
  std::vector<CapturedOp> ops = std::move(*capture_);
  capture_.reset();
  return std::make_unique<EmuGraph>(*this, std::move(ops));
}

}  // namespace qt::emu
