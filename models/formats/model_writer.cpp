#include "models/formats/model_writer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/parallel_ranges.h"
#include "models/formats/file_sink.h"
#include "models/formats/header.h"
#include "models/formats/layout.h"
#include "models/quant/q8_0.h"
#include "models/quant/quantized_tensor.h"

namespace qt {

namespace {

using formats::FileHeader;
using formats::PartRole;
using formats::TensorEntry;

// ak48's default group: AutoAWQ's 128, halved until it divides every K (tiny test models).
int32_t awq_group_rule(const ModelConfig& c) {
  return default_group_dividing(WeightType::AWQ_INT4, {c.dim, c.hidden_dim, c.q_dim()});
}

FileHeader header_for(const std::string& path, const WriterOptions& o) {
  FileHeader h;
  h.format = o.format;
  h.version = formats::format_version(o.format);
  h.config = o.config;
  if (h.config.group_size == 0 && h.config.dim > 0 && h.config.hidden_dim > 0 && h.config.n_heads > 0 &&
      h.config.head_dim > 0) {
    h.config.group_size = o.format == FileFormat::AK48 ? awq_group_rule(h.config)
                                                       : quant::q8_0_group_rule(h.config.dim);
  }
  h.expert_type = o.expert_type;
  if (o.format == FileFormat::MOE3) {
    h.expert_group_size = o.expert_group_size == 0 ? h.config.group_size : o.expert_group_size;
  } else if (o.expert_group_size != 0) {
    fail_file(path, "expert_group_size = " + std::to_string(o.expert_group_size) + " needs the moe3 format");
  }
  formats::validate_header(h, path);
  return h;
}

class StreamingWriter final : public ModelWriter {
 public:
  StreamingWriter(const std::string& path, const WriterOptions& options)
      : path_(path), header_(header_for(path, options)) {
    total_size_ = formats::walk_layout(header_, path, [this](const TensorEntry& e) {
      entries_.push_back(e);
      plan_.push_back(TensorSlot{formats::tensor_hf_name(e), e.rows, e.cols, e.type, e.group_size});
    });
    sink_ = std::make_unique<formats::FileSink>(path, total_size_);
  }

  const std::vector<TensorSlot>& plan() const override { return plan_; }

  void write_float_rows(const TensorSlot& slot, int64_t first_row, int64_t row_count, const float* values) override {
    const TensorEntry& e = expect(slot);
    if (first_row != rows_done_ || row_count <= 0 || row_count > e.rows - first_row) {
      fail_file(path_, "tensor " + slot.hf_name + ": rows [" + std::to_string(first_row) + ", " +
                           std::to_string(first_row + row_count) + ") supplied where rows [" +
                           std::to_string(rows_done_) + ", ...) of " + std::to_string(e.rows) + " are expected next");
    }
    const int64_t K = e.cols;
    for (int64_t i = 0; i < row_count * K; ++i) {
      if (!std::isfinite(values[i])) {
        fail_file(path_, "tensor " + slot.hf_name + " element " + std::to_string(first_row * K + i) + " is " +
                             (std::isnan(values[i]) ? "NaN" : "infinite") + "; model weights must be finite");
      }
    }
    int64_t row = first_row, left = row_count;
    const float* v = values;
    const int64_t pack = weight_traits(e.type).rows_per_word;
    if (pack > 1) {
      // One word packs `pack` output rows (AWQ: 8), so rows are encoded in blocks of that many; a range that
      // ends inside a block leaves its last rows in pending_ until the next range completes the block.
      if (!pending_.empty()) {
        const int64_t have = static_cast<int64_t>(pending_.size()) / K;
        const int64_t take = std::min<int64_t>(pack - have, left);
        pending_.insert(pending_.end(), v, v + take * K);
        v += take * K;
        row += take;
        left -= take;
        if (have + take == pack) {
          encode_rows(e, row - pack, pack, pending_.data());
          pending_.clear();
        }
      }
      if (left > 0) {
        const int64_t whole = left / pack * pack;
        if (whole > 0) encode_rows(e, row, whole, v);
        pending_.assign(v + whole * K, v + left * K);
      }
    } else {
      encode_rows(e, row, left, v);
    }
    rows_done_ += row_count;
    if (rows_done_ == e.rows) {
      rows_done_ = 0;
      ++next_;
    }
  }

  void write_awq(const TensorSlot& slot, const int32_t* qweight, const int32_t* qzeros,
                 const uint16_t* scales_f16) override {
    const TensorEntry& e = expect(slot);
    if (rows_done_ != 0) {
      fail_file(path_, "tensor " + slot.hf_name + ": packed AWQ supplied after " + std::to_string(rows_done_) + " of " +
                           std::to_string(e.rows) + " rows were written as floats");
    }
    if (e.type != WeightType::AWQ_INT4) {
      fail_file(path_, "tensor " + slot.hf_name + " is stored as " + weight_type_name(e.type) +
                           ", not AWQ_INT4; supply it with write_float");
    }
    for (int i = 0; i < e.part_count; ++i) {
      const formats::TensorPart& p = e.parts[static_cast<size_t>(i)];
      const void* src = p.role == PartRole::QWeight ? static_cast<const void*>(qweight)
                        : p.role == PartRole::QZeros ? static_cast<const void*>(qzeros)
                                                     : static_cast<const void*>(scales_f16);
      sink_->write_at(p.offset, src, p.bytes);
    }
    ++next_;
  }

  void finish() override {
    if (next_ != plan_.size()) {
      fail_file(path_, "finish() after " + std::to_string(next_) + " of " + std::to_string(plan_.size()) +
                           " tensors; next expected " + plan_[next_].hf_name +
                           (rows_done_ ? " (" + std::to_string(rows_done_) + " of its " +
                                             std::to_string(plan_[next_].rows) + " rows written)"
                                       : std::string()));
    }
    const auto header = formats::encode_header(header_);
    sink_->write_at(0, header.data(), header.size());
    sink_->commit(total_size_);
  }

 private:
  const TensorEntry& expect(const TensorSlot& slot) const {
    if (next_ >= plan_.size()) {
      fail_file(path_, "tensor " + slot.hf_name + " supplied after all " + std::to_string(plan_.size()) +
                           " tensors were written");
    }
    const TensorSlot& want = plan_[next_];
    if (slot.hf_name != want.hf_name || slot.rows != want.rows || slot.cols != want.cols || slot.type != want.type ||
        slot.group_size != want.group_size) {
      fail_file(path_, "tensor " + slot.hf_name + " [" + std::to_string(slot.rows) + "x" + std::to_string(slot.cols) +
                           " " + weight_type_name(slot.type) + "] supplied where the plan expects " + want.hf_name +
                           " [" + std::to_string(want.rows) + "x" + std::to_string(want.cols) + " " +
                           weight_type_name(want.type) + "]");
    }
    return entries_[next_];
  }

  // Encodes rows [n0, n0 + count) (both multiples of 8 for AWQ_INT4) and writes each array's share at its
  // offset. Row-major arrays ([N][...]: F32/F16/BF16 values, Q8_0 q and scales) take one contiguous run;
  // in-major arrays ([lines][N]: INT8_GW q/scales/zeros, AWQ qweight/qzeros/scales) take one run per
  // line, unless the range is the whole tensor.
  // Rows are encoded independently (every group lies within a row; AWQ words hold 8 rows), so a range is split
  // into blocks of whole words across the cores: qconvert synthetic of a 36-layer 8B model was bound by one
  // core's quantization. Each block writes its own bytes, so the file is the same however it is split.
  void encode_rows(const TensorEntry& e, int64_t n0, int64_t count, const float* v) {
    const int64_t pack = std::max<int64_t>(1, weight_traits(e.type).rows_per_word);
    const int64_t units = count % pack == 0 ? count / pack : 1;
    parallel_ranges(units, double(count) * double(e.cols), [&](int64_t b, int64_t end) {
      const int64_t first = b * pack, rows = end == units ? count - first : (end - b) * pack;
      if (rows > 0) encode_block(e, n0 + first, rows, v + first * e.cols);
    }, double(1 << 18));
  }

  void encode_block(const TensorEntry& e, int64_t n0, int64_t count, const float* v) {
    const uint64_t N = static_cast<uint64_t>(e.rows), K = static_cast<uint64_t>(e.cols);
    const uint64_t first = static_cast<uint64_t>(n0), n = static_cast<uint64_t>(count);
    if (e.type == WeightType::F32) {
      const formats::TensorPart& p = e.parts[0];
      sink_->write_at(p.offset + first * (p.bytes / N), v, n * (p.bytes / N));
      return;
    }
    const quant::QuantizedTensor q = quant::quantize_tensor(v, count, e.cols, e.type, e.group_size);
    const WeightTraits& traits = weight_traits(e.type);
    for (int i = 0; i < e.part_count; ++i) {
      const formats::TensorPart& p = e.parts[static_cast<size_t>(i)];
      const uint8_t* src = static_cast<const uint8_t*>(q.array(p.role));
      if (n == N) {
        sink_->write_at(p.offset, src, p.bytes);
        continue;
      }
      if (!traits.in_major) {
        const uint64_t row_bytes = p.bytes / N;
        sink_->write_at(p.offset + row_bytes * first, src, row_bytes * n);
        continue;
      }
      // A line per k (per-weight arrays) or per group holds every row's entries; this range owns the storage
      // units of its rows in each (AWQ words hold 8 rows, and n0 and count are multiples of 8 there).
      const ArraySpec& a = *traits.find(p.role);
      const uint64_t lines = a.extent == ArrayExtent::PerWeight ? K : K / static_cast<uint64_t>(e.group_size);
      const uint64_t line = p.bytes / lines;
      const uint64_t piece = n / a.entries_per_unit * a.unit_bytes;
      const uint64_t skip = first / a.entries_per_unit * a.unit_bytes;
      for (uint64_t l = 0; l < lines; ++l) sink_->write_at(p.offset + l * line + skip, src + l * piece, piece);
    }
  }

  std::string path_;
  FileHeader header_;
  std::vector<TensorEntry> entries_;
  std::vector<TensorSlot> plan_;
  uint64_t total_size_ = 0;
  size_t next_ = 0;
  int64_t rows_done_ = 0;       // rows of plan_[next_] supplied so far
  std::vector<float> pending_;  // AWQ_INT4: rows of an incomplete 8-row block, [rows][cols]
  std::unique_ptr<formats::FileSink> sink_;
};

}  // namespace

int64_t chunk_rows(const TensorSlot& slot, int64_t max_floats) {
  const int64_t pack = weight_traits(WeightType::AWQ_INT4).rows_per_word;  // the widest packing of any type
  const int64_t cols = std::max<int64_t>(slot.cols, 1);
  int64_t rows = std::max<int64_t>(max_floats / cols, 1);
  if (rows >= pack) rows = rows / pack * pack;
  return std::min(rows, std::max<int64_t>(slot.rows, 1));
}

std::unique_ptr<ModelWriter> ModelWriter::create(const std::string& path, const WriterOptions& options) {
  return std::make_unique<StreamingWriter>(path, options);
}

}  // namespace qt
