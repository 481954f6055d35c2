#pragma once
// The 256-byte headers of ajc1, moe3 and ak48: decoding with full validation, and encoding.
// Byte-level documentation: models/FORMATS.md.
#include <array>
#include <cstdint>
#include <string>

#include "models/core/model_config.h"
#include "models/core/weights.h"
#include "models/formats/model_file.h"

namespace qt::formats {

inline constexpr uint32_t kMagicAjc1 = 0x616A6331;  // on disk "1cja"
inline constexpr uint32_t kMagicMoe3 = 0x6D6F6533;  // on disk "3eom"
inline constexpr uint32_t kMagicAk48 = 0x616B3438;  // on disk "84ka"
inline constexpr int32_t kVersionAjc1 = 1;
inline constexpr int32_t kVersionMoe3 = 1;
inline constexpr int32_t kVersionAk48 = 5;
inline constexpr uint64_t kHeaderBytes = 256;
inline constexpr float kDefaultRopeTheta = 1e6f;
inline constexpr float kDefaultRmsNormEps = 1e-6f;

struct FileHeader {
  FileFormat format = FileFormat::AJC1;
  int32_t version = 0;
  ModelConfig config;  // rope_theta / rms_norm_eps with defaults applied
  // moe3 only: storage of expert matrices and their group (resolved: never 0).
  WeightType expert_type = WeightType::Q8_0;
  int32_t expert_group_size = 0;
};

uint32_t format_magic(FileFormat f);
int32_t format_version(FileFormat f);

// Decodes and validates the header of a mapped file: size >= 256, magic, version, every field's range,
// the zero padding, and the format's structural rules (validate_header). Errors name `path` and the field.
FileHeader decode_header(const uint8_t* data, uint64_t size, const std::string& path);

// Checks the configuration against the format: validate_config plus group-size divisibility, AWQ's
// N % 8, expert types. Shared by the reader and the writer.
void validate_header(const FileHeader& h, const std::string& source);

// The bytes of a header. theta / eps / expert group equal to their defaults are written as 0, so a default
// dense model is byte-identical to qwen3.c's export.
std::array<uint8_t, kHeaderBytes> encode_header(const FileHeader& h);

// WeightType stored in moe3's expert_type field (0 Q8_0, 1 INT8_GW_SYM, 2 INT8_GW_ASYM, 3 AWQ_INT4).
int32_t expert_type_code(WeightType t);

}  // namespace qt::formats
