#include "models/hf/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::hf {

namespace fs = std::filesystem;

HfCheckpoint::HfCheckpoint(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_file(dir, "not a directory (expected a Hugging Face checkpoint folder)");
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  if (fs::exists(index_path, ec)) {
    std::ifstream in(index_path);
    nlohmann::json index = nlohmann::json::parse(in, nullptr, false);
    if (index.is_discarded() || !index.is_object()) fail_file(index_path, "not a valid JSON object");
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      fail_file(index_path, "missing \"weight_map\" object");
    std::set<std::string> shards;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string()) fail_file(index_path, "weight_map entry '" + it.key() + "' is not a file name");
      const std::string shard = it.value().get<std::string>();
      // A shard must be a plain file name inside the checkpoint folder.
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        fail_file(index_path, "weight_map entry '" + it.key() + "' names an invalid shard file '" + shard + "'");
      shards.insert(shard);
    }
    if (shards.empty()) fail_file(index_path, "weight_map is empty");
    for (const auto& s : shards) add_file(s);
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      const std::string shard_path = dir + "/" + it.value().get<std::string>();
      TensorRef r = find(it.key());
      if (!r || r.file->path() != shard_path)
        fail_file(shard_path, "tensor '" + it.key() + "' is listed in model.safetensors.index.json but not stored here");
    }
  } else if (fs::exists(single_path, ec)) {
    add_file("model.safetensors");
  } else {
    fail_file(dir, "no model.safetensors or model.safetensors.index.json");
  }
}

void HfCheckpoint::add_file(const std::string& filename) {
  auto f = std::make_unique<SafetensorsFile>(dir_ + "/" + filename);
  for (const auto& [name, info] : f->tensors()) {
    if (TensorRef other = find(name))
      fail_file(f->path(), "tensor '" + name + "' is also stored in " + other.file->path());
  }
  files_.push_back(std::move(f));
}

TensorRef HfCheckpoint::find(const std::string& name) const {
  for (const auto& f : files_)
    if (const TensorInfo* t = f->find(name)) return TensorRef{f.get(), t};
  return {};
}

TensorRef HfCheckpoint::get(const std::string& name) const {
  TensorRef r = find(name);
  if (!r) fail_file(dir_, "tensor '" + name + "' not found in the checkpoint");
  return r;
}

uint64_t HfCheckpoint::total_tensor_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_)
    for (const auto& [name, t] : f->tensors()) n += t.nbytes;
  return n;
}

}  // namespace qt::hf
