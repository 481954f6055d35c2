#pragma once
// Synthetic checkpoints: deterministic random weights (models/synthetic/random_weights.h) of any Qwen3 /
// Qwen3-MoE shape, written either straight to a model file through ModelWriter or as a Hugging Face
// directory (config.json + safetensors, optionally sharded, fp32/fp16/bf16 or AutoAWQ INT4). Both stream:
// memory stays about one tensor. Because values depend only on (seed, tensor name, index), converting a
// synthetic fp32 HF checkpoint gives the same file as writing the model file directly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/core/model_config.h"
#include "models/formats/model_writer.h"

namespace qt::synthetic {

// Writes a model file; options.config is the shape (its group_size etc. as for any writer). Tensors are
// generated and written in row ranges of about `chunk_floats` floats; the file does not depend on it.
void write_model_file(const std::string& path, const WriterOptions& options, uint64_t seed, bool quiet = true,
                      int64_t chunk_floats = kWriterChunkFloats);

enum class HfDType { F32, F16, BF16 };
HfDType parse_hf_dtype(const std::string& name);  // "f32", "f16", "bf16"

struct HfWriteOptions {
  HfDType dtype = HfDType::F32;
  std::optional<int32_t> awq_group_size;  // AutoAWQ INT4 linear layers (others fp16); nullopt = float
  uint64_t shard_bytes = 0;               // 0: one model.safetensors; else shards of at most this size
  bool fused_experts = false;             // transformers-v5 mlp.experts.gate_up_proj / down_proj
};

// The Hugging Face names and shapes of the checkpoint's logical weights, in file order (norm vectors have
// rows = 1). Linear layers of the decoder are marked quantizable (what AutoAWQ packs).
struct HfWeight {
  std::string name;
  int64_t rows = 0, cols = 0;
  bool quantizable = false;
};
std::vector<HfWeight> hf_weights(const ModelConfig& c);

// Creates `dir` (if needed) and writes config.json and the safetensors file(s) into it.
void write_hf_checkpoint(const std::string& dir, const ModelConfig& c, uint64_t seed, const HfWriteOptions& options,
                         bool quiet = true);

}  // namespace qt::synthetic
