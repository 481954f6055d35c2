#pragma once
// Element types of safetensors files and their conversion to fp32 (the converter's working type).
#include <cstdint>
#include <optional>
#include <string>

namespace qt::hf {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

const char* dtype_name(DType t);
std::optional<DType> parse_dtype(const std::string& name);  // safetensors spelling: "F32", "BF16", ...
uint32_t dtype_size(DType t);
bool dtype_is_float_convertible(DType t);  // F32, F16, BF16: exactly representable as fp32

// Widens `count` little-endian elements starting at `src` (any alignment) to fp32. `t` must be float
// convertible (checked by the caller, which knows the tensor's name for the error message).
void convert_to_float(DType t, const uint8_t* src, uint64_t count, float* out);

}  // namespace qt::hf
