#include "models/formats/model_writer.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
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

constexpr int32_t kAwqDefaultGroup = 128;

// ak48's default group: AutoAWQ's 128, halved until it divides every K (tiny test models).
int32_t awq_group_rule(const ModelConfig& c) {
  int32_t g = kAwqDefaultGroup;
  while (g > 1 && (c.dim % g != 0 || c.hidden_dim % g != 0 || c.q_dim() % g != 0)) g /= 2;
  return g;
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
    sink_ = std::make_unique<formats::FileSink>(path);
  }

  const std::vector<TensorSlot>& plan() const override { return plan_; }

  void write_float(const TensorSlot& slot, const float* values) override {
    const TensorEntry& e = expect(slot);
    const int64_t count = e.rows * e.cols;
    for (int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(values[i])) {
        fail_file(path_, "tensor " + slot.hf_name + " element " + std::to_string(i) + " is " +
                             (std::isnan(values[i]) ? "NaN" : "infinite") + "; model weights must be finite");
      }
    }
    if (e.type == WeightType::F32) {
      sink_->write_at(e.parts[0].offset, values, e.parts[0].bytes);
    } else {
      const quant::QuantizedTensor q = quant::quantize_tensor(values, e.rows, e.cols, e.type, e.group_size);
      for (int i = 0; i < e.part_count; ++i) {
        const formats::TensorPart& p = e.parts[static_cast<size_t>(i)];
        sink_->write_at(p.offset, part_data(q, p.role), p.bytes);
      }
    }
    ++next_;
  }

  void write_awq(const TensorSlot& slot, const int32_t* qweight, const int32_t* qzeros,
                 const uint16_t* scales_f16) override {
    const TensorEntry& e = expect(slot);
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
                           " tensors; next expected " + plan_[next_].hf_name);
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

  static const void* part_data(const quant::QuantizedTensor& q, PartRole role) {
    switch (role) {
      case PartRole::Values:
      case PartRole::Q: return q.values.data();
      case PartRole::Scales:
        return q.type == WeightType::Q8_0 ? static_cast<const void*>(q.scales_f32.data())
                                          : static_cast<const void*>(q.scales_f16.data());
      case PartRole::Zeros: return q.zeros_f16.data();
      case PartRole::QWeight: return q.qweight.data();
      case PartRole::QZeros: return q.qzeros.data();
    }
    return nullptr;
  }

  std::string path_;
  FileHeader header_;
  std::vector<TensorEntry> entries_;
  std::vector<TensorSlot> plan_;
  uint64_t total_size_ = 0;
  size_t next_ = 0;
  std::unique_ptr<formats::FileSink> sink_;
};

}  // namespace

std::unique_ptr<ModelWriter> ModelWriter::create(const std::string& path, const WriterOptions& options) {
  return std::make_unique<StreamingWriter>(path, options);
}

}  // namespace qt
