#include "models/core/weight_traits.h"

#include <cstring>
#include <stdexcept>

#include "common/half.h"
#include "models/core/weights.h"

namespace qt {
namespace {

using ElementFn = float (*)(const QTensor&, int64_t, int64_t);
using RowFn = void (*)(const QTensor&, int64_t, float*);

// Reads one entry of an array the way the file stores it: mapped arrays need not be aligned for T.
template <class T>
T load(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// ---- reference dequantization, one element (the semantics in weights.h) ----

float f32_element(const QTensor& t, int64_t n, int64_t k) { return load<float>(t.data, n * t.cols + k); }
float f16_element(const QTensor& t, int64_t n, int64_t k) {
  return half_bits_to_float(load<uint16_t>(t.data, n * t.cols + k));
}
float bf16_element(const QTensor& t, int64_t n, int64_t k) {
  return bf16_bits_to_float(load<uint16_t>(t.data, n * t.cols + k));
}

float q8_0_element(const QTensor& t, int64_t n, int64_t k) {
  const int64_t flat = n * t.cols + k;
  const float s = load<float>(t.scales_f32, flat / t.group_size);
  return static_cast<float>(load<int8_t>(t.data, flat)) * s;
}

// q stored with +128 bias, in-major [K][N]; scales (and zeros) [K/G][N].
float int8_gw_q_times_scale(const QTensor& t, int64_t n, int64_t k) {
  const int64_t g = k / t.group_size;
  const float q = static_cast<float>(static_cast<int>(load<uint8_t>(t.data, k * t.rows + n)) - 128);
  return q * half_bits_to_float(load<uint16_t>(t.scales_f16, g * t.rows + n));
}
float int8_sym_element(const QTensor& t, int64_t n, int64_t k) { return int8_gw_q_times_scale(t, n, k); }
float int8_asym_element(const QTensor& t, int64_t n, int64_t k) {
  const int64_t g = k / t.group_size;
  return int8_gw_q_times_scale(t, n, k) + half_bits_to_float(load<uint16_t>(t.zeros_f16, g * t.rows + n));
}

float awq_int4_element(const QTensor& t, int64_t n, int64_t k) {
  const int64_t g = k / t.group_size;
  const int64_t words = t.rows / 8;
  const uint32_t qw = load<uint32_t>(t.data, k * words + n / 8);
  const uint32_t zw = load<uint32_t>(t.qzeros, g * words + n / 8);
  const float s = half_bits_to_float(load<uint16_t>(t.scales_f16, g * t.rows + n));
  const int q = static_cast<int>(awq_nibble(qw, n % 8));
  const int z = static_cast<int>(awq_nibble(zw, n % 8));
  return static_cast<float>(q - z) * s;
}

// A row is its elements in order: the quantized layouts are in-major, so a row walks with stride and the
// element definition stays the only one.
template <ElementFn Element>
void row_of_elements(const QTensor& t, int64_t row, float* out) {
  for (int64_t k = 0; k < t.cols; ++k) out[k] = Element(t, row, k);
}

// Q8_0 is row-major with a scale per group along the row, so its row is read a group at a time, which the
// compiler vectorizes: the same products as q8_0_element. The MoE router reads its rows every decode step.
void q8_0_row_values(const QTensor& t, int64_t row, float* out) {
  const int64_t groups = t.cols / t.group_size;
  if (t.group_size <= 0 || groups * t.group_size != t.cols) return row_of_elements<q8_0_element>(t, row, out);
  const auto* q = static_cast<const int8_t*>(t.data) + row * t.cols;
  for (int64_t g = 0; g < groups; ++g) {
    const float s = load<float>(t.scales_f32, row * groups + g);
    for (int64_t k = g * t.group_size; k < (g + 1) * t.group_size; ++k) out[k] = static_cast<float>(q[k]) * s;
  }
}

void f32_row(const QTensor& t, int64_t row, float* out) {
  std::memcpy(out, static_cast<const uint8_t*>(t.data) + row * t.cols * 4, static_cast<size_t>(t.cols) * 4);
}

// ---- the table ----

constexpr ArraySpec kValues32{WeightArray::Values, ArrayExtent::PerWeight, 1, 4};
constexpr ArraySpec kValues16{WeightArray::Values, ArrayExtent::PerWeight, 1, 2};
constexpr ArraySpec kQ8{WeightArray::Q, ArrayExtent::PerWeight, 1, 1};
constexpr ArraySpec kScalesF32{WeightArray::Scales, ArrayExtent::PerGroup, 1, 4};
constexpr ArraySpec kScalesF16{WeightArray::Scales, ArrayExtent::PerGroup, 1, 2};
constexpr ArraySpec kZerosF16{WeightArray::Zeros, ArrayExtent::PerGroup, 1, 2};
constexpr ArraySpec kAwqQWeight{WeightArray::QWeight, ArrayExtent::PerWeight, 8, 4};
constexpr ArraySpec kAwqQZeros{WeightArray::QZeros, ArrayExtent::PerGroup, 8, 4};

constexpr WeightTraits float_row(WeightType type, const char* name, const char* short_name, ArraySpec values,
                                 ElementFn element, RowFn row) {
  WeightTraits r;
  r.type = type;
  r.name = name;
  r.short_name = short_name;
  r.option_name = short_name;
  r.array_count = 1;
  r.arrays = {values};
  r.dequantize_element = element;
  r.dequantize_row = row;
  return r;
}

constexpr WeightTraits q8_0_row() {
  WeightTraits r;
  r.type = WeightType::Q8_0;
  r.name = "Q8_0";
  r.short_name = "q8_0";
  r.option_name = "q8_0";
  r.quantized = true;
  r.scale = ScaleType::F32;
  r.default_group = 64;  // qwen3.c's export rule starts here
  r.array_count = 2;
  r.arrays = {kQ8, kScalesF32};
  r.dequantize_element = q8_0_element;
  r.dequantize_row = q8_0_row_values;
  return r;
}

constexpr WeightTraits int8_gw_row(bool asym) {
  WeightTraits r;
  r.type = asym ? WeightType::INT8_GW_ASYM : WeightType::INT8_GW_SYM;
  r.name = asym ? "INT8_GW_ASYM" : "INT8_GW_SYM";
  r.short_name = asym ? "int8_asym" : "int8_sym";
  r.option_name = asym ? "int8-asym" : "int8-sym";
  r.quantized = true;
  r.in_major = true;
  r.scale = ScaleType::F16;
  r.has_zeros = asym;
  r.array_count = asym ? 3 : 2;
  r.arrays = {kQ8, kScalesF16, kZerosF16};
  r.dequantize_element = asym ? int8_asym_element : int8_sym_element;
  r.dequantize_row = asym ? row_of_elements<int8_asym_element> : row_of_elements<int8_sym_element>;
  return r;
}

constexpr WeightTraits awq_int4_row() {
  WeightTraits r;
  r.type = WeightType::AWQ_INT4;
  r.name = "AWQ_INT4";
  r.short_name = "awq_int4";
  r.option_name = "awq";
  r.quantized = true;
  r.in_major = true;
  r.rows_per_word = 8;
  r.scale = ScaleType::F16;
  r.has_zeros = true;
  r.default_group = 128;  // AutoAWQ's
  r.array_count = 3;
  r.arrays = {kAwqQWeight, kAwqQZeros, kScalesF16};
  r.dequantize_element = awq_int4_element;
  r.dequantize_row = row_of_elements<awq_int4_element>;
  return r;
}

constexpr WeightTraits kTraits[] = {
    float_row(WeightType::F32, "F32", "f32", kValues32, f32_element, f32_row),
    float_row(WeightType::F16, "F16", "f16", kValues16, f16_element, row_of_elements<f16_element>),
    float_row(WeightType::BF16, "BF16", "bf16", kValues16, bf16_element, row_of_elements<bf16_element>),
    q8_0_row(),
    int8_gw_row(false),
    int8_gw_row(true),
    awq_int4_row(),
};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kTraits); ++i)
    if (static_cast<size_t>(kTraits[i].type) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kTraits is indexed by WeightType");
static_assert(std::size(kTraits) == static_cast<size_t>(WeightType::AWQ_INT4) + 1, "one row per WeightType");

std::optional<WeightType> find_type(std::string_view name, const char* WeightTraits::*field, bool quantized_only) {
  for (const WeightTraits& r : kTraits)
    if ((r.quantized || !quantized_only) && name == r.*field) return r.type;
  return std::nullopt;
}

}  // namespace

const char* weight_array_name(WeightArray a) {
  switch (a) {
    case WeightArray::Values: return "values";
    case WeightArray::Q: return "q";
    case WeightArray::Scales: return "scales";
    case WeightArray::Zeros: return "zeros";
    case WeightArray::QWeight: return "qweight";
    case WeightArray::QZeros: return "qzeros";
  }
  return "?";
}

const ArraySpec* WeightTraits::find(WeightArray a) const {
  for (const ArraySpec& s : array_specs())
    if (s.array == a) return &s;
  return nullptr;
}

const WeightTraits& weight_traits(WeightType t) {
  const size_t i = static_cast<size_t>(t);
  if (i >= std::size(kTraits)) throw std::logic_error("weight_traits: unknown weight type");
  return kTraits[i];
}

std::optional<WeightType> weight_type_by_name(std::string_view name) {
  return find_type(name, &WeightTraits::name, false);
}

std::optional<WeightType> quantized_type_by_short_name(std::string_view name) {
  return find_type(name, &WeightTraits::short_name, true);
}

std::optional<WeightType> quantized_type_by_option_name(std::string_view name) {
  return find_type(name, &WeightTraits::option_name, true);
}

int32_t default_group_dividing(WeightType t, std::initializer_list<int64_t> ks) {
  int32_t g = weight_traits(t).default_group;
  auto divides_all = [&] {
    for (int64_t k : ks)
      if (k % g != 0) return false;
    return true;
  };
  while (g > 1 && !divides_all()) g /= 2;
  return g;
}

}  // namespace qt
