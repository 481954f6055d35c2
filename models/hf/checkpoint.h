#pragma once
// A Hugging Face checkpoint directory: config.json plus either model.safetensors or a sharded set listed
// in model.safetensors.index.json (weight_map: tensor name -> shard file). All shards are memory-mapped;
// tensors are looked up by name across them.
#include <memory>
#include <string>
#include <vector>

#include "models/hf/safetensors_file.h"

namespace qt::hf {

struct TensorRef {
  const SafetensorsFile* file = nullptr;
  const TensorInfo* info = nullptr;
  explicit operator bool() const { return info != nullptr; }
};

class HfCheckpoint {
 public:
  // Throws qt::Error naming the directory or file if neither layout is present, the index is malformed,
  // a shard is missing or invalid, the index names a tensor its shard lacks, or a tensor is in two shards.
  explicit HfCheckpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string config_path() const { return dir_ + "/config.json"; }
  TensorRef find(const std::string& name) const;
  // Like find() but throws "tensor 'x' not found in <dir>" when absent.
  TensorRef get(const std::string& name) const;
  uint64_t total_tensor_bytes() const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  void add_file(const std::string& filename);
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace qt::hf
