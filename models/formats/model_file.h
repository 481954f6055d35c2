#pragma once
// Opening a model file: memory-map it, validate everything, and expose typed weight views.
// Contract shared by the formats (models/formats), the converter and the runtime.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/core/weights.h"

namespace qt {

enum class FileFormat { AJC1, MOE3, AK48 };

const char* file_format_name(FileFormat f);               // "ajc1", "moe3", "ak48"
FileFormat parse_file_format(const std::string& name);     // throws qt::Error on an unknown name

class ModelFile {
 public:
  virtual ~ModelFile() = default;

  // Maps and validates `path`: magic, version, every header field's range and relations, and the exact
  // file size the header implies (64-bit arithmetic). Any problem is a qt::Error (exit code 2) whose
  // one-line message names the file, the field and the value. Never reads outside the mapping.
  static std::unique_ptr<ModelFile> open(const std::string& path);

  virtual FileFormat format() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const ModelWeights& weights() const = 0;  // views into the mapping; valid while this object lives
  virtual uint64_t file_size() const = 0;
  // Header fields and the table of tensors (name, type, shape, offset, bytes) for `qconvert info`.
  virtual nlohmann::json describe() const = 0;
};

}  // namespace qt
