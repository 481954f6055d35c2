#pragma once
// A model's weights on a device, uploaded once: each QTensor's arrays under the names kernel families bind
// them by (models' weight_array_name: "q", "scales", "qweight", ...), found again by the view's data address.
// Quantized types keep their file layout (the families read it as is); fp32 and bf16 matrices are stored as
// fp16 "values", the one float weight type the device families take. Norm vectors stay fp32.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device/api/device.h"
#include "models/core/weights.h"

namespace qt::rt {

struct DeviceTensor {
  WeightType type = WeightType::F16;  // as stored on the device
  int64_t rows = 0, cols = 0, group = 0;
  struct Array {
    dev::DevPtr ptr;
    int64_t bytes = 0;
  };
  std::map<std::string, Array> arrays;  // by weight_array_name
};

class DeviceWeights {
 public:
  explicit DeviceWeights(dev::Device& device) : device_(device) {}
  void add(const QTensor& t);
  void add_vector(const std::vector<float>& v);
  // Throws qt::Error when the tensor or vector was never added (an op on weights prepare() did not see).
  const DeviceTensor& tensor(const QTensor& t) const;
  DeviceTensor::Array vector(const float* host) const;
  uint64_t bytes() const { return bytes_; }

 private:
  dev::DevPtr upload(const void* data, size_t bytes);
  dev::Device& device_;
  std::vector<dev::Buffer> buffers_;
  std::map<const void*, DeviceTensor> tensors_;
  std::map<const float*, DeviceTensor::Array> vectors_;
  uint64_t bytes_ = 0;
};

}  // namespace qt::rt
