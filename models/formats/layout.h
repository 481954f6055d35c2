#pragma once
// Where every tensor of a model file lives, computed from its header alone. The reader checks the file
// size against it and builds views from it; the writer derives its plan and write offsets from it, so
// both sides share one definition of each format's body.
#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "models/core/weights.h"
#include "models/formats/header.h"

namespace qt::formats {

// A part is one of the tensor's arrays (models/core/weight_traits.h), named as weight_array_name says.
using PartRole = WeightArray;
inline const char* part_role_name(PartRole r) { return weight_array_name(r); }

struct TensorPart {
  PartRole role = PartRole::Values;
  uint64_t offset = 0;  // from the start of the file
  uint64_t bytes = 0;
};

enum class TensorKind : uint8_t {
  AttnNorm, FfnNorm, FinalNorm, QNorm, KNorm, Embedding,
  Wq, Wk, Wv, Wo, W1, W2, W3, Router, ExpertW1, ExpertW2, ExpertW3, Classifier
};

struct TensorEntry {
  TensorKind kind = TensorKind::Embedding;
  int32_t layer = -1;
  int32_t expert = -1;
  WeightType type = WeightType::F32;
  int64_t rows = 0, cols = 0;  // [N][K]; norms have rows = 1
  int32_t group_size = 0;
  std::array<TensorPart, 3> parts{};
  int part_count = 0;

  uint64_t bytes() const;
  bool is_vector() const;  // a norm
};

// Hugging Face name of the tensor (the writer plan's hf_name).
std::string tensor_hf_name(const TensorEntry& e);

// Calls `visit` for every tensor in the order a producer supplies them (file order, except that moe3's
// non-Q8_0 expert blocks interleave experts inside each block). Returns the exact file size. Throws a
// qt::Error naming `source` on 64-bit overflow or on an array whose offset is misaligned for its type.
uint64_t walk_layout(const FileHeader& h, const std::string& source,
                     const std::function<void(const TensorEntry&)>& visit);

}  // namespace qt::formats
