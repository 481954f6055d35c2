#pragma once
// Emptying a GPU's L2 between timed repetitions, so that each one reads its weights from DRAM as a model step
// does: a buffer of twice the device's L2 size (allocated on first use) is overwritten with a new byte each
// round, so that no write is skipped as redundant. The tuner and qbench's reports time with it.
#include <cstdint>

#include "device/api/device.h"

namespace qt::cuda {

// The L2 cache's size in bytes of `device`; 0 where it has none to speak of (the emulator).
int64_t l2_bytes(const dev::Device& device);

class L2Flusher {
 public:
  // Queues the overwrite on `device`'s stream; false, doing nothing, on a device with no L2 to flush (the
  // emulator).
  bool flush(dev::Device& device);

 private:
  dev::Buffer buffer_;
  unsigned char round_ = 0;
};

}  // namespace qt::cuda
