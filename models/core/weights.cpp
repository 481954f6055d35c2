#include "models/core/weights.h"

#include <cstring>
#include <stdexcept>

#include "common/half.h"

namespace qt {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "F32";
    case WeightType::F16: return "F16";
    case WeightType::BF16: return "BF16";
    case WeightType::Q8_0: return "Q8_0";
    case WeightType::INT8_GW_SYM: return "INT8_GW_SYM";
    case WeightType::INT8_GW_ASYM: return "INT8_GW_ASYM";
    case WeightType::AWQ_INT4: return "AWQ_INT4";
  }
  return "unknown";
}

uint64_t QTensor::storage_bytes() const {
  const uint64_t n = static_cast<uint64_t>(rows), k = static_cast<uint64_t>(cols);
  const uint64_t groups_k = group_size > 0 ? k / static_cast<uint64_t>(group_size) : 0;
  switch (type) {
    case WeightType::F32: return n * k * 4;
    case WeightType::F16:
    case WeightType::BF16: return n * k * 2;
    case WeightType::Q8_0: return n * k + (group_size > 0 ? n * k / static_cast<uint64_t>(group_size) * 4 : 0);
    case WeightType::INT8_GW_SYM: return n * k + groups_k * n * 2;
    case WeightType::INT8_GW_ASYM: return n * k + groups_k * n * 4;
    case WeightType::AWQ_INT4: return k * n / 2 + groups_k * (n / 8) * 4 + groups_k * n * 2;
  }
  return 0;
}

namespace {

// Reads one element of a possibly unaligned array the way the file stores it.
template <class T>
T load(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

uint32_t awq_nibble(uint32_t word, int64_t e) { return (word >> (4 * kAwqOrder[e])) & 0xFu; }

}  // namespace

float dequant_element(const QTensor& t, int64_t row, int64_t col) {
  const int64_t n = row, k = col;
  switch (t.type) {
    case WeightType::F32: return load<float>(t.data, n * t.cols + k);
    case WeightType::F16: return half_bits_to_float(load<uint16_t>(t.data, n * t.cols + k));
    case WeightType::BF16: return bf16_bits_to_float(load<uint16_t>(t.data, n * t.cols + k));
    case WeightType::Q8_0: {
      const int64_t flat = n * t.cols + k;
      const float s = load<float>(t.scales_f32, flat / t.group_size);
      return static_cast<float>(load<int8_t>(t.data, flat)) * s;
    }
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM: {
      const int64_t g = k / t.group_size;
      const float q = static_cast<float>(static_cast<int>(load<uint8_t>(t.data, k * t.rows + n)) - 128);
      const float s = half_bits_to_float(load<uint16_t>(t.scales_f16, g * t.rows + n));
      if (t.type == WeightType::INT8_GW_SYM) return q * s;
      const float z = half_bits_to_float(load<uint16_t>(t.zeros_f16, g * t.rows + n));
      return q * s + z;
    }
    case WeightType::AWQ_INT4: {
      const int64_t g = k / t.group_size;
      const int64_t words = t.rows / 8;
      const uint32_t qw = load<uint32_t>(t.data, k * words + n / 8);
      const uint32_t zw = load<uint32_t>(t.qzeros, g * words + n / 8);
      const float s = half_bits_to_float(load<uint16_t>(t.scales_f16, g * t.rows + n));
      const int q = static_cast<int>(awq_nibble(qw, n % 8));
      const int z = static_cast<int>(awq_nibble(zw, n % 8));
      return static_cast<float>(q - z) * s;
    }
  }
  throw std::logic_error("dequant_element: unknown weight type");
}

void dequantize_row(const QTensor& t, int64_t row, float* out) {
  // The quantized layouts are in-major ([K][N]) so a row walks with stride; the per-element definition
  // is the reference, and speed here does not matter.
  if (t.type == WeightType::F32) {
    std::memcpy(out, static_cast<const uint8_t*>(t.data) + row * t.cols * 4, static_cast<size_t>(t.cols) * 4);
    return;
  }
  for (int64_t k = 0; k < t.cols; ++k) out[k] = dequant_element(t, row, k);
}

std::vector<float> dequantize(const QTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  for (int64_t n = 0; n < t.rows; ++n) dequantize_row(t, n, out.data() + n * t.cols);
  return out;
}

}  // namespace qt
