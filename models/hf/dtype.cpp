#include "models/hf/dtype.h"

#include <cstring>

#include "common/half.h"

namespace qt::hf {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  uint32_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F64, "F64", 8},  {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8},        {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},  {DType::I8, "I8", 1},           {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};
}  // namespace

const char* dtype_name(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.name;
  return "?";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& i : kInfo)
    if (name == i.name) return i.type;
  return std::nullopt;
}

uint32_t dtype_size(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.size;
  return 0;
}

bool dtype_is_float_convertible(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void convert_to_float(DType t, const uint8_t* src, uint64_t count, float* out) {
  switch (t) {
    case DType::F32:
      std::memcpy(out, src, count * 4);
      return;
    case DType::F16:
      for (uint64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = half_bits_to_float(h);
      }
      return;
    case DType::BF16:
      for (uint64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16_bits_to_float(h);
      }
      return;
    default:
      return;
  }
}

}  // namespace qt::hf
