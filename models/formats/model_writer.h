#pragma once
// Writing a model file in a streaming way. The writer decides the order (each format groups tensors
// differently); the producer (converter, synthetic generator) walks `plan()` and supplies each tensor in
// turn, so at most one tensor is in memory at a time.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/core/weights.h"
#include "models/formats/model_file.h"

namespace qt {

struct WriterOptions {
  FileFormat format = FileFormat::AJC1;
  ModelConfig config;  // config.group_size: Q8_0 group (0 = qwen3.c rule: 64 halved until it divides dim),
                       // or the AWQ group for ak48 (default 128)
  // moe3 only: how expert matrices are stored (Q8_0, INT8_GW_SYM, INT8_GW_ASYM or AWQ_INT4) and their group.
  WeightType expert_type = WeightType::Q8_0;
  int32_t expert_group_size = 0;  // 0 = same as config.group_size
};

// One tensor the format needs, in file order. `hf_name` is the Hugging Face name of the source tensor:
//   model.embed_tokens.weight, model.norm.weight, lm_head.weight,
//   model.layers.{l}.input_layernorm.weight, ...post_attention_layernorm.weight,
//   model.layers.{l}.self_attn.{q,k,v,o}_proj.weight, ...self_attn.{q,k}_norm.weight,
//   model.layers.{l}.mlp.{gate,up,down}_proj.weight (dense),
//   model.layers.{l}.mlp.gate.weight (router), model.layers.{l}.mlp.experts.{e}.{gate,up,down}_proj.weight.
// Vectors (norms) have rows = 1.
struct TensorSlot {
  std::string hf_name;
  int64_t rows = 0, cols = 0;
  WeightType type = WeightType::F32;  // how the file stores it
  int32_t group_size = 0;
};

// Producers feed tensors in row ranges of about this many floats (16 MB), so their buffers and the
// writer's encoded copy stay a few tens of MB whatever the model (a 151936 x 4096 embedding is 2.5 GB).
constexpr int64_t kWriterChunkFloats = int64_t{4} << 20;

// Rows per write_float_rows call that keep a range within `max_floats` floats: a multiple of 8 where the
// tensor is that large (AWQ packs 8 rows a word, and [K][N] arrays then take fewer, longer runs), at
// least 1 and at most slot.rows.
int64_t chunk_rows(const TensorSlot& slot, int64_t max_floats = kWriterChunkFloats);

class ModelWriter {
 public:
  virtual ~ModelWriter() = default;
  // Validates the options (same rules as the reader) and creates the file; throws qt::Error on problems.
  static std::unique_ptr<ModelWriter> create(const std::string& path, const WriterOptions& options);

  virtual const std::vector<TensorSlot>& plan() const = 0;
  // Supply rows [first_row, first_row + row_count) of the next slot's tensor as floats [row_count][cols];
  // the writer encodes them as slot.type. Rows are output features and every quantization group lies
  // within a row, so a tensor may arrive in any number of consecutive row ranges of any size: first_row
  // must equal the rows already supplied for this slot, and the slot counts as written once all its rows
  // have arrived. The file is byte-identical however the rows are split, and the writer holds at most the
  // encoded form of one range (plus, for AWQ_INT4, up to 7 rows awaiting their 8-row word) — memory does
  // not grow with the tensor. `values` need only live for the call.
  virtual void write_float_rows(const TensorSlot& slot, int64_t first_row, int64_t row_count,
                                const float* values) = 0;
  // The whole tensor at once: write_float_rows(slot, 0, slot.rows, values).
  void write_float(const TensorSlot& slot, const float* values) { write_float_rows(slot, 0, slot.rows, values); }
  // Supply an AWQ_INT4 slot already packed (AutoAWQ checkpoint pass-through, bit-exact).
  virtual void write_awq(const TensorSlot& slot, const int32_t* qweight, const int32_t* qzeros,
                         const uint16_t* scales_f16) = 0;
  // Checks every slot was written in order, writes the header, flushes and closes. A writer destroyed
  // without finish() removes its partial file.
  virtual void finish() = 0;
};

}  // namespace qt
