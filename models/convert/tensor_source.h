#pragma once
// Fetches the tensors a model file needs from a Hugging Face checkpoint, by the hf_name conventions of
// models/formats/model_writer.h, whatever way the checkpoint stores them:
//   - plain float tensors (F32/F16/BF16) named as in the plan;
//   - MoE experts fused transformers-v5 style (mlp.experts.gate_up_proj [E, 2I, H], gate first, and
//     mlp.experts.down_proj [E, H, I]) when the per-expert names are absent;
//   - AutoAWQ INT4 layers (<module>.qweight/.qzeros/.scales) in place of <module>.weight, either passed
//     through packed or dequantized to floats.
// Tensors are read in row ranges and the pages of the mapped checkpoint are released as they are consumed,
// so resident memory stays about one range, however large the tensor.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/hf/checkpoint.h"
#include "models/hf/hf_config.h"

namespace qt::convert {

struct AwqPacked {
  std::vector<int32_t> qweight, qzeros;  // [K][N/8], [K/G][N/8]
  std::vector<uint16_t> scales;          // fp16 bits [K/G][N]
  int32_t group_size = 0;
};

class TensorSource {
 public:
  TensorSource(const hf::HfCheckpoint& ckpt, const hf::HfModelConfig& config);

  // True if the checkpoint holds the tensor under any of the supported layouts.
  bool has(const std::string& hf_name) const;
  // Rows [first_row, first_row + row_count) of `hf_name`, a [rows][cols] tensor (rows = 1 for vectors), as
  // fp32 [row_count][cols]. Throws qt::Error naming the tensor and file if it is missing, has another
  // shape, or an unsupported dtype. Reading the rows in order releases the source as it goes; an AutoAWQ
  // source (dequantized, its arrays being [K][N]) is released after its last row.
  void read_float_rows(const std::string& hf_name, int64_t rows, int64_t cols, int64_t first_row, int64_t row_count,
                       float* out) const;
  // If `hf_name` is stored as AutoAWQ INT4 with group `group_size` and fp16 scales, copies the packed arrays
  // (validated against [rows][cols]) and returns true; otherwise returns false.
  bool read_awq(const std::string& hf_name, int64_t rows, int64_t cols, int32_t group_size, AwqPacked& out) const;
  // Whether two tensors hold the same values (used to detect an lm_head identical to the embedding).
  bool same_values(const std::string& a, const std::string& b) const;
  // Bytes of the checkpoint consumed so far (for progress and throughput).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  struct AwqRefs {
    hf::TensorRef qweight, qzeros, scales;
  };
  std::optional<AwqRefs> find_awq(const std::string& hf_name) const;
  void check_shape(const hf::TensorRef& r, const std::vector<int64_t>& expect) const;
  void check_awq(const AwqRefs& refs, int64_t rows, int64_t cols) const;
  bool read_fused_expert(const std::string& hf_name, int64_t rows, int64_t cols, int64_t first_row,
                         int64_t row_count, float* out) const;
  void dequantize_awq_rows(const AwqRefs& refs, int64_t rows, int64_t cols, int64_t first_row, int64_t row_count,
                           float* out) const;
  void read_range(const hf::TensorRef& r, uint64_t first, uint64_t count, float* out) const;
  void done_with(const hf::TensorRef& r) const;

  const hf::HfCheckpoint& ckpt_;
  const hf::HfModelConfig& config_;
  mutable uint64_t bytes_read_ = 0;
};

}  // namespace qt::convert
