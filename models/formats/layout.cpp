#include "models/formats/layout.h"

#include <string>

#include "common/error.h"
#include "models/formats/checked_size.h"

namespace qt::formats {

const char* part_role_name(PartRole r) {
  switch (r) {
    case PartRole::Values: return "values";
    case PartRole::Q: return "q";
    case PartRole::Scales: return "scales";
    case PartRole::Zeros: return "zeros";
    case PartRole::QWeight: return "qweight";
    case PartRole::QZeros: return "qzeros";
  }
  return "?";
}

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

uint64_t element_align(PartRole role, WeightType type) {
  switch (role) {
    case PartRole::Values: return type == WeightType::F32 ? 4 : 2;
    case PartRole::Q: return 1;
    case PartRole::Scales: return type == WeightType::Q8_0 ? 4 : 2;
    case PartRole::Zeros: return 2;
    case PartRole::QWeight:
    case PartRole::QZeros: return 4;
  }
  return 1;
}

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
    e.group_size = (type == WeightType::F32 || type == WeightType::F16 || type == WeightType::BF16) ? 0 : group;
    return e;
  }

  void add_part(TensorEntry& e, PartRole role, uint64_t offset, uint64_t bytes) const {
    const uint64_t align = element_align(role, e.type);
    if (offset % align != 0) {
      fail_file(source_, "header field group_size = " + std::to_string(e.group_size) + " with these dimensions puts " +
                             tensor_hf_name(e) + "'s " + part_role_name(role) + " array at offset " +
                             std::to_string(offset) + ", not " + std::to_string(align) +
                             "-byte aligned; qtune needs aligned arrays");
    }
    e.parts[static_cast<size_t>(e.part_count++)] = TensorPart{role, offset, bytes};
  }

  // One tensor whose parts follow each other, at the running offset.
  void contiguous(TensorEntry e) {
    const uint64_t n = static_cast<uint64_t>(e.rows), k = static_cast<uint64_t>(e.cols);
    const uint64_t count = math_.mul(n, k);
    const uint64_t groups = e.group_size > 0 ? math_.mul(n, k / static_cast<uint64_t>(e.group_size)) : 0;
    auto next = [&](PartRole role, uint64_t bytes) {
      add_part(e, role, offset_, bytes);
      offset_ = math_.add(offset_, bytes);
    };
    switch (e.type) {
      case WeightType::F32: next(PartRole::Values, math_.mul(count, 4)); break;
      case WeightType::F16:
      case WeightType::BF16: next(PartRole::Values, math_.mul(count, 2)); break;
      case WeightType::Q8_0:
        next(PartRole::Q, count);
        next(PartRole::Scales, math_.mul(groups, 4));
        break;
      case WeightType::INT8_GW_SYM:
      case WeightType::INT8_GW_ASYM:
        next(PartRole::Q, count);
        next(PartRole::Scales, math_.mul(groups, 2));
        if (e.type == WeightType::INT8_GW_ASYM) next(PartRole::Zeros, math_.mul(groups, 2));
        break;
      case WeightType::AWQ_INT4:
        next(PartRole::QWeight, count / 2);
        next(PartRole::QZeros, math_.mul(groups / 8, 4));
        next(PartRole::Scales, math_.mul(groups, 2));
        break;
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
    const uint64_t groups = math_.mul(n, k / static_cast<uint64_t>(group));
    struct Array { PartRole role; uint64_t bytes; };
    std::array<Array, 3> arrays{};
    int count = 0;
    if (type == WeightType::AWQ_INT4) {
      arrays = {Array{PartRole::QWeight, math_.mul(n, k) / 2}, Array{PartRole::QZeros, math_.mul(groups / 8, 4)},
                Array{PartRole::Scales, math_.mul(groups, 2)}};
      count = 3;
    } else {
      arrays = {Array{PartRole::Q, math_.mul(n, k)}, Array{PartRole::Scales, math_.mul(groups, 2)},
                Array{PartRole::Zeros, math_.mul(groups, 2)}};
      count = type == WeightType::INT8_GW_ASYM ? 3 : 2;
    }
    std::array<uint64_t, 3> starts{};
    uint64_t at = offset_;
    for (int i = 0; i < count; ++i) {
      starts[static_cast<size_t>(i)] = at;
      at = math_.add(at, math_.mul(arrays[static_cast<size_t>(i)].bytes, static_cast<uint64_t>(experts)));
    }
    for (int32_t x = 0; x < experts; ++x) {
      TensorEntry e = entry(kind, layer, x, type, rows, cols, group);
      for (int i = 0; i < count; ++i) {
        const Array& a = arrays[static_cast<size_t>(i)];
        add_part(e, a.role, starts[static_cast<size_t>(i)] + a.bytes * static_cast<uint64_t>(x), a.bytes);
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
