#include "models/formats/layout.h"

#include <span>
#include <string>

#include "common/error.h"
#include "models/formats/checked_size.h"

namespace qt::formats {

uint64_t TensorEntry::bytes() const {
  uint64_t b = 0;
  for (int i = 0; i < part_count; ++i) b += parts[static_cast<size_t>(i)].bytes;
  return b;
}

bool TensorEntry::is_vector() const {
  switch (kind) {
    case TensorKind::AttnNorm:
    case TensorKind::FfnNorm:
    case TensorKind::FinalNorm:
    case TensorKind::QNorm:
    case TensorKind::KNorm: return true;
    default: return false;
  }
}

std::string tensor_hf_name(const TensorEntry& e) {
  const std::string layer = "model.layers." + std::to_string(e.layer) + ".";
  const std::string expert = layer + "mlp.experts." + std::to_string(e.expert) + ".";
  switch (e.kind) {
    case TensorKind::AttnNorm: return layer + "input_layernorm.weight";
    case TensorKind::FfnNorm: return layer + "post_attention_layernorm.weight";
    case TensorKind::FinalNorm: return "model.norm.weight";
    case TensorKind::QNorm: return layer + "self_attn.q_norm.weight";
    case TensorKind::KNorm: return layer + "self_attn.k_norm.weight";
    case TensorKind::Embedding: return "model.embed_tokens.weight";
    case TensorKind::Wq: return layer + "self_attn.q_proj.weight";
    case TensorKind::Wk: return layer + "self_attn.k_proj.weight";
    case TensorKind::Wv: return layer + "self_attn.v_proj.weight";
    case TensorKind::Wo: return layer + "self_attn.o_proj.weight";
    case TensorKind::W1: return layer + "mlp.gate_proj.weight";
    case TensorKind::W2: return layer + "mlp.down_proj.weight";
    case TensorKind::W3: return layer + "mlp.up_proj.weight";
    case TensorKind::Router: return layer + "mlp.gate.weight";
    case TensorKind::ExpertW1: return expert + "gate_proj.weight";
    case TensorKind::ExpertW2: return expert + "down_proj.weight";
    case TensorKind::ExpertW3: return expert + "up_proj.weight";
    case TensorKind::Classifier: return "lm_head.weight";
  }
  return "?";
}

namespace {

class Walker {
 public:
  Walker(const FileHeader& h, const std::string& source, const std::function<void(const TensorEntry&)>& visit)
      : h_(h), c_(h.config), source_(source), math_(source), visit_(visit) {}

  uint64_t run() {
    switch (h_.format) {
      case FileFormat::AJC1: ajc1(); break;
      case FileFormat::MOE3: moe3(); break;
      case FileFormat::AK48: ak48(); break;
    }
    return offset_;
  }

 private:
  TensorEntry entry(TensorKind kind, int32_t layer, int32_t expert, WeightType type, int64_t rows, int64_t cols,
                    int32_t group) const {
    TensorEntry e;
    e.kind = kind;
    e.layer = layer;
    e.expert = expert;
    e.type = type;
    e.rows = rows;
    e.cols = cols;
    e.group_size = weight_traits(type).quantized ? group : 0;
    return e;
  }

  void add_part(TensorEntry& e, const ArraySpec& a, uint64_t offset, uint64_t bytes) const {
    const uint64_t align = a.unit_bytes;
    if (offset % align != 0) {
      fail_file(source_, "header field group_size = " + std::to_string(e.group_size) + " with these dimensions puts " +
                             tensor_hf_name(e) + "'s " + part_role_name(a.array) + " array at offset " +
                             std::to_string(offset) + ", not " + std::to_string(align) +
                             "-byte aligned; qtune needs aligned arrays");
    }
    e.parts[static_cast<size_t>(e.part_count++)] = TensorPart{a.array, offset, bytes};
  }

  // An array's bytes with overflow checks: entries / entries_per_unit * unit_bytes.
  uint64_t array_bytes(const ArraySpec& a, uint64_t weights, uint64_t groups) const {
    const uint64_t entries = a.extent == ArrayExtent::PerWeight ? weights : groups;
    return math_.mul(entries / a.entries_per_unit, a.unit_bytes);
  }

  // One tensor whose parts follow each other, at the running offset.
  void contiguous(TensorEntry e) {
    const uint64_t n = static_cast<uint64_t>(e.rows), k = static_cast<uint64_t>(e.cols);
    const uint64_t count = math_.mul(n, k);
    const uint64_t groups = e.group_size > 0 ? math_.mul(n, k / static_cast<uint64_t>(e.group_size)) : 0;
    for (const ArraySpec& a : weight_traits(e.type).array_specs()) {
      const uint64_t bytes = array_bytes(a, count, groups);
      add_part(e, a, offset_, bytes);
      offset_ = math_.add(offset_, bytes);
    }
    visit_(e);
  }

  // moe3: the E experts of one projection. Q8_0 experts are E consecutive tensors; the other types store
  // every expert's first array, then every expert's second array, and so on.
  void expert_block(TensorKind kind, int32_t layer, int64_t rows, int64_t cols) {
    const int32_t experts = c_.num_experts;
    const WeightType type = h_.expert_type;
    const int32_t group = h_.expert_group_size;
    if (type == WeightType::Q8_0) {
      for (int32_t x = 0; x < experts; ++x) contiguous(entry(kind, layer, x, type, rows, cols, group));
      return;
    }
    const uint64_t n = static_cast<uint64_t>(rows), k = static_cast<uint64_t>(cols);
    const uint64_t count = math_.mul(n, k);
    const uint64_t groups = math_.mul(n, k / static_cast<uint64_t>(group));
    const std::span<const ArraySpec> arrays = weight_traits(type).array_specs();
    std::array<uint64_t, 3> starts{}, bytes{};
    uint64_t at = offset_;
    for (size_t i = 0; i < arrays.size(); ++i) {
      bytes[i] = array_bytes(arrays[i], count, groups);
      starts[i] = at;
      at = math_.add(at, math_.mul(bytes[i], static_cast<uint64_t>(experts)));
    }
    for (int32_t x = 0; x < experts; ++x) {
      TensorEntry e = entry(kind, layer, x, type, rows, cols, group);
      for (size_t i = 0; i < arrays.size(); ++i) {
        add_part(e, arrays[i], starts[i] + bytes[i] * static_cast<uint64_t>(x), bytes[i]);
      }
      visit_(e);
    }
    offset_ = at;
  }

  void norms(WeightType t) {
    for (int32_t l = 0; l < c_.n_layers; ++l) contiguous(entry(TensorKind::AttnNorm, l, -1, t, 1, c_.dim, 0));
    for (int32_t l = 0; l < c_.n_layers; ++l) contiguous(entry(TensorKind::FfnNorm, l, -1, t, 1, c_.dim, 0));
    contiguous(entry(TensorKind::FinalNorm, -1, -1, t, 1, c_.dim, 0));
  }
  void qk_norms(WeightType t) {
    for (int32_t l = 0; l < c_.n_layers; ++l) contiguous(entry(TensorKind::QNorm, l, -1, t, 1, c_.head_dim, 0));
    for (int32_t l = 0; l < c_.n_layers; ++l) contiguous(entry(TensorKind::KNorm, l, -1, t, 1, c_.head_dim, 0));
  }

  struct Shape { TensorKind kind; int64_t rows, cols; };
  std::array<Shape, 7> dense_matrices() const {
    const int64_t d = c_.dim, h = c_.hidden_dim, q = c_.q_dim(), kv = c_.kv_dim();
    return {Shape{TensorKind::Wq, q, d}, Shape{TensorKind::Wk, kv, d}, Shape{TensorKind::Wv, kv, d},
            Shape{TensorKind::Wo, d, q}, Shape{TensorKind::W1, h, d}, Shape{TensorKind::W2, d, h},
            Shape{TensorKind::W3, h, d}};
  }

  void ajc1() {
    offset_ = kHeaderBytes;
    const int32_t g = c_.group_size;
    norms(WeightType::F32);
    qk_norms(WeightType::F32);
    contiguous(entry(TensorKind::Embedding, -1, -1, WeightType::Q8_0, c_.vocab_size, c_.dim, g));
    for (const Shape& s : dense_matrices()) {
      for (int32_t l = 0; l < c_.n_layers; ++l) contiguous(entry(s.kind, l, -1, WeightType::Q8_0, s.rows, s.cols, g));
    }
    if (!c_.shared_classifier) {
      contiguous(entry(TensorKind::Classifier, -1, -1, WeightType::Q8_0, c_.vocab_size, c_.dim, g));
    }
  }

  void moe3() {
    offset_ = kHeaderBytes;
    const int32_t g = c_.group_size;
    const int64_t d = c_.dim, h = c_.hidden_dim, q = c_.q_dim(), kv = c_.kv_dim();
    norms(WeightType::F32);
    qk_norms(WeightType::F32);
    contiguous(entry(TensorKind::Embedding, -1, -1, WeightType::Q8_0, c_.vocab_size, d, g));
    for (int32_t l = 0; l < c_.n_layers; ++l) {
      contiguous(entry(TensorKind::Wq, l, -1, WeightType::Q8_0, q, d, g));
      contiguous(entry(TensorKind::Wk, l, -1, WeightType::Q8_0, kv, d, g));
      contiguous(entry(TensorKind::Wv, l, -1, WeightType::Q8_0, kv, d, g));
      contiguous(entry(TensorKind::Wo, l, -1, WeightType::Q8_0, d, q, g));
      contiguous(entry(TensorKind::Router, l, -1, WeightType::Q8_0, c_.num_experts, d, g));
      expert_block(TensorKind::ExpertW1, l, h, d);
      expert_block(TensorKind::ExpertW2, l, d, h);
      expert_block(TensorKind::ExpertW3, l, h, d);
    }
    if (!c_.shared_classifier) {
      contiguous(entry(TensorKind::Classifier, -1, -1, WeightType::Q8_0, c_.vocab_size, d, g));
    }
  }

  void ak48() {
    offset_ = kHeaderBytes;
    const int32_t g = c_.group_size;
    norms(WeightType::F16);
    contiguous(entry(TensorKind::Embedding, -1, -1, WeightType::F16, c_.vocab_size, c_.dim, 0));
    for (const Shape& s : dense_matrices()) {
      for (int32_t l = 0; l < c_.n_layers; ++l) {
        contiguous(entry(s.kind, l, -1, WeightType::AWQ_INT4, s.rows, s.cols, g));
      }
    }
    if (!c_.shared_classifier) {
      contiguous(entry(TensorKind::Classifier, -1, -1, WeightType::F16, c_.vocab_size, c_.dim, 0));
    }
    qk_norms(WeightType::F16);
  }

  const FileHeader& h_;
  const ModelConfig& c_;
  const std::string& source_;
  CheckedSize math_;
  const std::function<void(const TensorEntry&)>& visit_;
  uint64_t offset_ = 0;
};

}  // namespace

uint64_t walk_layout(const FileHeader& h, const std::string& source,
                     const std::function<void(const TensorEntry&)>& visit) {
  return Walker(h, source, visit).run();
}

}  // namespace qt::formats
