#include "models/core/weights.h"

#include <cstddef>

#include "common/error.h"

namespace qt {

const char* weight_type_name(WeightType t) {
  if (static_cast<size_t>(t) > static_cast<size_t>(WeightType::AWQ_INT4)) return "unknown";
  return weight_traits(t).name;
}

uint64_t QTensor::storage_bytes() const {
  const uint64_t n = static_cast<uint64_t>(rows), k = static_cast<uint64_t>(cols);
  const uint64_t groups = group_size > 0 ? n * (k / static_cast<uint64_t>(group_size)) : 0;
  uint64_t bytes = 0;
  for (const ArraySpec& a : weight_traits(type).array_specs()) bytes += a.bytes(n * k, groups);
  return bytes;
}

const void* QTensor::array(WeightArray a) const {
  switch (a) {
    case WeightArray::Values:
    case WeightArray::Q:
    case WeightArray::QWeight: return data;
    case WeightArray::Scales:
      return weight_traits(type).scale == ScaleType::F32 ? static_cast<const void*>(scales_f32) : scales_f16;
    case WeightArray::Zeros: return zeros_f16;
    case WeightArray::QZeros: return qzeros;
  }
  return nullptr;
}

uint64_t QTensor::array_bytes(const ArraySpec& spec) const {
  const uint64_t weights = uint64_t(rows) * uint64_t(cols);
  return spec.bytes(weights, group_size > 0 ? weights / uint64_t(group_size) : 0);
}

void QTensor::set_array(WeightArray array, const void* p) {
  switch (array) {
    case WeightArray::Values:
    case WeightArray::Q:
    case WeightArray::QWeight: data = p; return;
    case WeightArray::Scales:
      if (weight_traits(type).scale == ScaleType::F32) {
        scales_f32 = static_cast<const float*>(p);
      } else {
        scales_f16 = static_cast<const uint16_t*>(p);
      }
      return;
    case WeightArray::Zeros: zeros_f16 = static_cast<const uint16_t*>(p); return;
    case WeightArray::QZeros: qzeros = static_cast<const int32_t*>(p); return;
  }
}

QTensor ExpertStack::expert(int64_t e) const {
  if (e < 0 || e >= experts)
    throw Error("expert " + std::to_string(e) + " is outside the stack of " + std::to_string(experts));
  QTensor t = base;
  const auto specs = weight_traits(base.type).array_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(base.array(specs[i].array));
    t.set_array(specs[i].array, p + stride[i] * uint64_t(e));
  }
  return t;
}

ExpertStack stack_experts(const std::vector<QTensor>& experts, const std::string& what) {
  ExpertStack s;
  bool none = true;
  for (const QTensor& t : experts) none = none && t.empty();
  if (none) return s;  // a dense layer of a MoE model
  s.base = experts[0];
  s.experts = int64_t(experts.size());
  const auto specs = weight_traits(s.base.type).array_specs();
  if (specs.size() > s.stride.size()) throw Error(what + ": too many arrays per expert");
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto addr = [&](size_t e) { return reinterpret_cast<uintptr_t>(experts[e].array(specs[i].array)); };
    if (experts.size() > 1) s.stride[i] = uint64_t(addr(1) - addr(0));
    if (addr(0) == 0) throw Error(what + ": expert 0 has no " + weight_array_name(specs[i].array) + " array");
  }
  for (size_t e = 0; e < experts.size(); ++e) {
    const QTensor& t = experts[e];
    if (t.type != s.base.type || t.rows != s.base.rows || t.cols != s.base.cols || t.group_size != s.base.group_size)
      throw Error(what + ": expert " + std::to_string(e) + " differs in type or shape from expert 0");
    for (size_t i = 0; i < specs.size(); ++i) {
      const uintptr_t want = reinterpret_cast<uintptr_t>(s.base.array(specs[i].array)) + s.stride[i] * e;
      if (reinterpret_cast<uintptr_t>(t.array(specs[i].array)) != want)
        throw Error(what + ": the " + weight_array_name(specs[i].array) + " array of expert " + std::to_string(e) +
                    " is not evenly spaced after the others (experts must be stored as one [E][N][K] block)");
    }
  }
  return s;
}

float dequant_element(const QTensor& t, int64_t row, int64_t col) {
  return weight_traits(t.type).dequantize_element(t, row, col);
}

void dequantize_row(const QTensor& t, int64_t row, float* out) { weight_traits(t.type).dequantize_row(t, row, out); }

std::vector<float> dequantize(const QTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  for (int64_t n = 0; n < t.rows; ++n) dequantize_row(t, n, out.data() + n * t.cols);
  return out;
}

}  // namespace qt
