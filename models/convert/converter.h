#pragma once
// Hugging Face checkpoint directory -> qtune model file (ajc1, moe3 or ak48), streamed tensor by tensor in
// the order the format's writer plans. Float tensors (F32/F16/BF16) are widened to fp32 and encoded by the
// writer; AutoAWQ INT4 layers are copied bit-exact into AWQ slots with the same group size and dequantized
// for every other slot.
#include <cstdint>
#include <optional>
#include <string>

#include "models/core/weights.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"

namespace qt::convert {

struct ConvertOptions {
  std::string hf_dir;
  std::string out_path;
  FileFormat format = FileFormat::AJC1;
  std::optional<WeightType> expert_type;  // moe3 only; default Q8_0
  int32_t group_size = 0;         // 0: Q8_0 qwen3.c rule (ajc1/moe3); ak48: the checkpoint's AWQ group, else the writer's rule
  int32_t expert_group_size = 0;  // moe3: 0 = the checkpoint's AWQ group for AWQ experts, else group_size
  bool copy_tokenizer = true;     // copy tokenizer.json / tokenizer_config.json next to the output
  bool quiet = false;             // no progress output
  // Float tensors are read and encoded in row ranges of about this many floats (at least one row): the
  // bound on the converter's working memory. The output does not depend on it.
  int64_t chunk_floats = kWriterChunkFloats;
};

struct ConvertResult {
  uint64_t input_bytes = 0;   // checkpoint tensor bytes read
  uint64_t output_bytes = 0;  // size of the written model file
  double seconds = 0;
  int64_t awq_passthrough = 0;  // slots copied packed from the checkpoint
  int64_t slots = 0;
  std::vector<std::string> copied_files;  // tokenizer files placed next to the output
};

// Parses "q8_0", "int8-sym", "int8-asym", "awq" (qt::Error otherwise).
WeightType parse_expert_type(const std::string& name);

ConvertResult convert_checkpoint(const ConvertOptions& options);

}  // namespace qt::convert
