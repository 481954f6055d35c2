#pragma once
// What each WeightType is, in one table: names, the arrays it is stored as (the parts of a model file, the
// pointers of a QTensor), their sizes and alignment, the scale and zero-point kind, the packing and group
// rules, and its reference dequantization. Readers, writers, quantizers, the runtime and the tuner look
// these facts up here instead of each switching on the type; only logic that really differs per type
// (quantizers, CPU packing and kernels) still dispatches on it.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

namespace qt {

enum class WeightType : uint8_t { F32, F16, BF16, Q8_0, INT8_GW_SYM, INT8_GW_ASYM, AWQ_INT4 };

struct QTensor;

// The arrays a weight is stored as. The names are those of the model-file parts ("values", "q", ...).
enum class WeightArray : uint8_t { Values, Q, Scales, Zeros, QWeight, QZeros };
const char* weight_array_name(WeightArray a);

// An array has one entry per weight ([N][K] elements) or one per group of G weights along K.
enum class ArrayExtent : uint8_t { PerWeight, PerGroup };

struct ArraySpec {
  WeightArray array = WeightArray::Values;
  ArrayExtent extent = ArrayExtent::PerWeight;
  // Entries share storage units: AWQ packs the 4-bit entries of 8 output rows into one int32 word. The unit
  // is also the alignment the array needs. Bytes = entries / entries_per_unit * unit_bytes.
  uint8_t entries_per_unit = 1;
  uint8_t unit_bytes = 1;

  uint64_t bytes(uint64_t weights, uint64_t groups) const {
    return (extent == ArrayExtent::PerWeight ? weights : groups) / entries_per_unit * unit_bytes;
  }
};

enum class ScaleType : uint8_t { None, F32, F16 };

struct WeightTraits {
  WeightType type = WeightType::F32;
  const char* name = "";         // "Q8_0", "AWQ_INT4": descriptions and messages
  const char* short_name = "";   // "q8_0", "int8_sym", "awq_int4": qtune --type, tuner family names
  const char* option_name = "";  // "q8_0", "int8-sym", "awq": qconvert/qbench --expert-type
  bool quantized = false;        // has scales and a group size G that divides K
  // Quantized arrays laid in-major ([K][N], [K/G][N]) like AWQ and TensorRT-LLM, not row-major [N][...].
  bool in_major = false;
  uint8_t rows_per_word = 1;  // output rows packed into one word: N must be a multiple of it
  ScaleType scale = ScaleType::None;
  bool has_zeros = false;      // a zero point per group (INT8 additive fp16 offset, AWQ packed 4-bit zero)
  int32_t default_group = 0;   // the group a producer starts from when none is given; 0: none of its own
  uint8_t array_count = 0;
  std::array<ArraySpec, 3> arrays{};  // in file order

  // Reference dequantization to fp32, the definition every kernel is checked against.
  float (*dequantize_element)(const QTensor& t, int64_t row, int64_t col) = nullptr;
  void (*dequantize_row)(const QTensor& t, int64_t row, float* out) = nullptr;  // out[cols]

  std::span<const ArraySpec> array_specs() const { return {arrays.data(), array_count}; }
  // Stored bits per weight, scales and zeros aside: the first array holds the weights themselves.
  int element_bits() const { return arrays[0].unit_bytes * 8 / arrays[0].entries_per_unit; }
  const ArraySpec* find(WeightArray a) const;
};

const WeightTraits& weight_traits(WeightType t);

// The type with this name ("AWQ_INT4"); nullopt for any other text.
std::optional<WeightType> weight_type_by_name(std::string_view name);
// The quantized type with this short_name / option_name; nullopt for other names, float types' included.
std::optional<WeightType> quantized_type_by_short_name(std::string_view name);
std::optional<WeightType> quantized_type_by_option_name(std::string_view name);

// A quantized type's default group, halved until it divides every given in-dimension K (small models).
int32_t default_group_dividing(WeightType t, std::initializer_list<int64_t> ks);

// AutoAWQ's GEMM packing: logical element e (0..7) of a word, i.e. output row 8j+e of word j, sits at
// nibble kAwqOrder[e].
inline constexpr int kAwqOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr int awq_shift(int64_t e) { return 4 * kAwqOrder[e]; }
constexpr uint32_t awq_nibble(uint32_t word, int64_t e) { return (word >> awq_shift(e)) & 0xFu; }

}  // namespace qt
