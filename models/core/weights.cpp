#include "models/core/weights.h"

#include <cstddef>

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
