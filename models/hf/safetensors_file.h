#pragma once
// A read-only, memory-mapped .safetensors file: 8-byte little-endian header length, a JSON header mapping
// each tensor name to {dtype, shape, data_offsets}, then the data. Opening validates the whole header
// (sizes, dtypes, offsets inside the data area, byte counts matching the shape, no overlaps) so that every
// later access is in bounds; problems are qt::Error naming the file and the tensor.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "models/hf/dtype.h"

namespace qt::hf {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t nbytes = 0;
  uint64_t numel() const;
  std::string shape_string() const;  // "[3, 4]"
};

class SafetensorsFile {
 public:
  // Headers larger than this are refused before parsing (the reference implementation uses 100 MB).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return map_.path(); }
  uint64_t file_size() const { return map_.size(); }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;

  // Raw bytes of a tensor (validated to lie inside the file).
  const uint8_t* data(const TensorInfo& t) const { return map_.data() + t.offset; }
  // Reads elements [first, first+count) of the flattened tensor as fp32; throws if the dtype is not
  // F32/F16/BF16 or the range is outside the tensor.
  void read_float(const TensorInfo& t, uint64_t first, uint64_t count, float* out) const;
  // Drops the tensor's pages from this process's resident set (streaming: each tensor is read once).
  void release(const TensorInfo& t) const { map_.release_pages(t.offset, t.nbytes); }
  void release(const TensorInfo& t, uint64_t first, uint64_t count) const {
    map_.release_pages(t.offset + first * dtype_size(t.dtype), count * dtype_size(t.dtype));
  }

 private:
  void parse_header();
  MappedFile map_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace qt::hf
