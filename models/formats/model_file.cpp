#include "models/formats/model_file.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "models/formats/header.h"
#include "models/formats/layout.h"

namespace qt {

const char* file_format_name(FileFormat f) {
  switch (f) {
    case FileFormat::AJC1: return "ajc1";
    case FileFormat::MOE3: return "moe3";
    case FileFormat::AK48: return "ak48";
  }
  return "?";
}

FileFormat parse_file_format(const std::string& name) {
  if (name == "ajc1") return FileFormat::AJC1;
  if (name == "moe3") return FileFormat::MOE3;
  if (name == "ak48") return FileFormat::AK48;
  throw Error("unknown model file format '" + name + "' (expected ajc1, moe3 or ak48)");
}

namespace {

using formats::FileHeader;
using formats::PartRole;
using formats::TensorEntry;
using formats::TensorKind;

class MappedModelFile final : public ModelFile {
 public:
  explicit MappedModelFile(const std::string& path) : map_(path) {
    header_ = formats::decode_header(map_.data(), map_.size(), path);
    // Size first (no allocation proportional to the header's claims), then the table.
    const uint64_t expected = formats::walk_layout(header_, path, [](const TensorEntry&) {});
    if (expected != map_.size()) {
      fail_file(path, "file size " + std::to_string(map_.size()) + " bytes does not match the " +
                          std::to_string(expected) + " bytes its " + file_format_name(header_.format) +
                          " header implies (truncated or wrong header)");
    }
    formats::walk_layout(header_, path, [this](const TensorEntry& e) { entries_.push_back(e); });
    build_weights();
  }

  FileFormat format() const override { return header_.format; }
  const ModelConfig& config() const override { return weights_.config; }
  const ModelWeights& weights() const override { return weights_; }
  uint64_t file_size() const override { return map_.size(); }
  nlohmann::json describe() const override;

 private:
  const void* at(const TensorEntry& e, PartRole role) const {
    for (int i = 0; i < e.part_count; ++i) {
      const formats::TensorPart& p = e.parts[static_cast<size_t>(i)];
      // The size check guarantees every part lies inside the mapping; assert it anyway at the one place
      // pointers are made.
      if (p.role == role) {
        if (p.offset > map_.size() || p.bytes > map_.size() - p.offset) {
          fail_file(map_.path(), "internal: tensor " + formats::tensor_hf_name(e) + " lies outside the file");
        }
        return map_.data() + p.offset;
      }
    }
    return nullptr;
  }

  QTensor view(const TensorEntry& e) const {
    QTensor t;
    t.type = e.type;
    t.rows = e.rows;
    t.cols = e.cols;
    t.group_size = e.group_size;
    for (const ArraySpec& a : weight_traits(e.type).array_specs()) t.set_array(a.array, at(e, a.array));
    return t;
  }

  // Norms are widened to fp32 by the type's own dequantization (a norm is a one-row tensor).
  std::vector<float> widen(const TensorEntry& e) const {
    std::vector<float> out(static_cast<size_t>(e.cols));
    dequantize_row(view(e), 0, out.data());
    return out;
  }

  void build_weights() {
    const ModelConfig& c = header_.config;
    weights_.config = c;
    weights_.layers.resize(static_cast<size_t>(c.n_layers));
    // Experts are collected one by one, then checked to form one evenly spaced block per projection.
    const size_t layers = static_cast<size_t>(c.n_layers), experts = static_cast<size_t>(c.num_experts);
    std::vector<std::vector<QTensor>> w1(layers), w2(layers), w3(layers);
    if (c.is_moe()) {
      for (size_t l = 0; l < layers; ++l) w1[l].resize(experts), w2[l].resize(experts), w3[l].resize(experts);
    }
    for (const TensorEntry& e : entries_) {
      LayerWeights* lw = e.layer >= 0 ? &weights_.layers[static_cast<size_t>(e.layer)] : nullptr;
      const size_t x = static_cast<size_t>(e.expert);
      switch (e.kind) {
        case TensorKind::AttnNorm: lw->attn_norm = widen(e); break;
        case TensorKind::FfnNorm: lw->ffn_norm = widen(e); break;
        case TensorKind::FinalNorm: weights_.final_norm = widen(e); break;
        case TensorKind::QNorm: lw->q_norm = widen(e); break;
        case TensorKind::KNorm: lw->k_norm = widen(e); break;
        case TensorKind::Embedding: weights_.embedding = view(e); break;
        case TensorKind::Classifier: weights_.classifier = view(e); break;
        case TensorKind::Wq: lw->wq = view(e); break;
        case TensorKind::Wk: lw->wk = view(e); break;
        case TensorKind::Wv: lw->wv = view(e); break;
        case TensorKind::Wo: lw->wo = view(e); break;
        case TensorKind::W1: lw->w1 = view(e); break;
        case TensorKind::W2: lw->w2 = view(e); break;
        case TensorKind::W3: lw->w3 = view(e); break;
        case TensorKind::Router: lw->router = view(e); break;
        case TensorKind::ExpertW1: w1[static_cast<size_t>(e.layer)][x] = view(e); break;
        case TensorKind::ExpertW2: w2[static_cast<size_t>(e.layer)][x] = view(e); break;
        case TensorKind::ExpertW3: w3[static_cast<size_t>(e.layer)][x] = view(e); break;
      }
    }
    for (size_t l = 0; l < layers && c.is_moe(); ++l) {
      const std::string at = map_.path() + ": layer " + std::to_string(l) + " ";
      LayerWeights& lw = weights_.layers[l];
      lw.expert_w1 = stack_experts(w1[l], at + "expert gate_proj");
      lw.expert_w2 = stack_experts(w2[l], at + "expert down_proj");
      lw.expert_w3 = stack_experts(w3[l], at + "expert up_proj");
    }
    if (c.shared_classifier) weights_.classifier = weights_.embedding;
  }

  MappedFile map_;
  FileHeader header_;
  std::vector<TensorEntry> entries_;
  ModelWeights weights_;
};

nlohmann::json MappedModelFile::describe() const {
  using nlohmann::json;
  const ModelConfig& c = header_.config;
  json header = {
      {"magic", file_format_name(header_.format)},
      {"version", header_.version},
      {"dim", c.dim},
      {"hidden_dim", c.hidden_dim},
      {"n_layers", c.n_layers},
      {"n_heads", c.n_heads},
      {"n_kv_heads", c.n_kv_heads},
      {"vocab_size", c.vocab_size},
      {"max_seq_len", c.max_seq_len},
      {"head_dim", c.head_dim},
      {"shared_classifier", c.shared_classifier},
      {"group_size", c.group_size},
      {"rope_theta", c.rope_theta},
      {"rms_norm_eps", c.rms_norm_eps},
  };
  if (c.is_moe()) {
    header["num_experts"] = c.num_experts;
    header["num_experts_per_tok"] = c.num_experts_per_tok;
    header["norm_topk_prob"] = c.norm_topk_prob;
    header["expert_type"] = weight_type_name(header_.expert_type);
    header["expert_group_size"] = header_.expert_group_size;
  }
  json tensors = json::array();
  for (const TensorEntry& e : entries_) {
    json parts = json::array();
    for (int i = 0; i < e.part_count; ++i) {
      const formats::TensorPart& p = e.parts[static_cast<size_t>(i)];
      parts.push_back({{"role", formats::part_role_name(p.role)}, {"offset", p.offset}, {"bytes", p.bytes}});
    }
    json t = {{"name", formats::tensor_hf_name(e)},
              {"type", weight_type_name(e.type)},
              {"shape", e.is_vector() ? json::array({e.cols}) : json::array({e.rows, e.cols})},
              {"offset", e.parts[0].offset},
              {"bytes", e.bytes()},
              {"parts", parts}};
    if (e.group_size > 0) t["group_size"] = e.group_size;
    tensors.push_back(std::move(t));
  }
  return json{{"format", file_format_name(header_.format)},
              {"version", header_.version},
              {"file_size", map_.size()},
              {"header", header},
              {"tensors", tensors}};
}

}  // namespace

std::unique_ptr<ModelFile> ModelFile::open(const std::string& path) {
  return std::make_unique<MappedModelFile>(path);
}

}  // namespace qt
