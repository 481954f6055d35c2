#include "device/cuda/l2_flush.h"

#include "device/cuda/cuda_device.h"

namespace qt::cuda {

int64_t l2_bytes(const dev::Device& device) {
  const auto* gpu = dynamic_cast<const CudaDevice*>(&device);
  return gpu ? int64_t(gpu->facts().l2_bytes) : 0;
}

bool L2Flusher::flush(dev::Device& device) {
  const int64_t l2 = l2_bytes(device);
  if (l2 == 0) return false;
  if (!buffer_.bytes()) buffer_ = dev::Buffer(device, size_t(2 * l2));
  device.memset(buffer_.ptr(), ++round_, buffer_.bytes());
  return true;
}

}  // namespace qt::cuda
