#pragma once
// Streaming .safetensors writer: the tensor list (names, dtypes, shapes) is declared up front so the JSON
// header can be written first; the data then follows tensor by tensor in declaration order, so a
// multi-gigabyte checkpoint never has to be in memory. A writer destroyed before finish() removes its
// partial file.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "models/hf/dtype.h"

namespace qt::hf {

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t nbytes() const;
};

class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends bytes of the current tensor (declaration order; `name` must match it). A tensor may be written
  // in several parts; it is complete once its declared size has been given.
  void write(const std::string& name, const void* bytes, uint64_t nbytes);
  // Appends fp32 values converted to the tensor's declared dtype (F32, F16 or BF16; RNE rounding).
  void write_float(const std::string& name, const float* values, uint64_t count);
  void finish();

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  static uint64_t header_bytes(const std::vector<TensorSpec>& tensors, const std::map<std::string, std::string>& metadata);

 private:
  void put(const void* bytes, uint64_t n);
  std::string path_;
  std::vector<TensorSpec> tensors_;
  std::FILE* file_ = nullptr;
  size_t next_ = 0;
  uint64_t written_ = 0;  // bytes of tensors_[next_] written so far
  bool finished_ = false;
};

}  // namespace qt::hf
