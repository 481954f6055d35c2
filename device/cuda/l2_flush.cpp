#include "device/cuda/l2_flush.h"

#include "device/cuda/cuda_device.h"

namespace qt::cuda {

bool L2Flusher::flush(dev::Device& device) {
  const auto* gpu = dynamic_cast<const CudaDevice*>(&device);
  if (!gpu || gpu->facts().l2_bytes == 0) return false;
  if (!buffer_.bytes()) buffer_ = dev::Buffer(device, size_t(2 * gpu->facts().l2_bytes));
  device.memset(buffer_.ptr(), ++round_, buffer_.bytes());
  return true;
}

}  // namespace qt::cuda
