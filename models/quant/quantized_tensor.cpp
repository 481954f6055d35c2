#include "models/quant/quantized_tensor.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "common/half.h"
#include "models/quant/awq_int4.h"
#include "models/quant/int8_gw.h"
#include "models/quant/q8_0.h"

namespace qt::quant {

const void* QuantizedTensor::array(WeightArray a) const {
  switch (a) {
    case WeightArray::Values:
    case WeightArray::Q: return values.data();
    case WeightArray::Scales:
      return weight_traits(type).scale == ScaleType::F32 ? static_cast<const void*>(scales_f32.data())
                                                         : static_cast<const void*>(scales_f16.data());
    case WeightArray::Zeros: return zeros_f16.data();
    case WeightArray::QWeight: return qweight.data();
    case WeightArray::QZeros: return qzeros.data();
  }
  return nullptr;
}

QTensor QuantizedTensor::view() const {
  QTensor t;
  t.type = type;
  t.rows = rows;
  t.cols = cols;
  t.group_size = group_size;
  for (const ArraySpec& a : weight_traits(type).array_specs()) t.set_array(a.array, array(a.array));
  return t;
}

QuantizedTensor quantize_tensor(const float* w, int64_t rows, int64_t cols, WeightType type, int32_t group_size) {
  QuantizedTensor out;
  out.type = type;
  out.rows = rows;
  out.cols = cols;
  const WeightTraits& traits = weight_traits(type);
  const bool grouped = traits.quantized;
  out.group_size = grouped ? group_size : 0;
  if (rows <= 0 || cols <= 0) {
    throw Error("quantize_tensor: empty shape " + std::to_string(rows) + "x" + std::to_string(cols), kExitFailure);
  }
  if (grouped && (group_size <= 0 || cols % group_size != 0)) {
    throw Error(std::string("quantize_tensor: ") + weight_type_name(type) + " group size " +
                    std::to_string(group_size) + " does not divide K = " + std::to_string(cols), kExitFailure);
  }
  if (rows % traits.rows_per_word != 0) {
    throw Error(std::string("quantize_tensor: ") + traits.name + " needs N % " + std::to_string(traits.rows_per_word) +
                    " == 0, N = " + std::to_string(rows), kExitFailure);
  }
  const size_t count = static_cast<size_t>(rows * cols);
  const size_t groups = grouped ? static_cast<size_t>(rows * (cols / group_size)) : 0;
  switch (type) {
    case WeightType::F32:
      out.values.resize(count * 4);
      std::memcpy(out.values.data(), w, count * 4);
      break;
    case WeightType::F16:
    case WeightType::BF16: {
      out.values.resize(count * 2);
      for (size_t i = 0; i < count; ++i) {
        const uint16_t b = type == WeightType::F16 ? float_to_half_bits(w[i]) : float_to_bf16_bits(w[i]);
        std::memcpy(out.values.data() + 2 * i, &b, 2);
      }
      break;
    }
    case WeightType::Q8_0:
      out.values.resize(count);
      out.scales_f32.resize(groups);
      quantize_q8_0(w, static_cast<int64_t>(count), group_size, reinterpret_cast<int8_t*>(out.values.data()),
                    out.scales_f32.data());
      break;
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM: {
      const bool asym = traits.has_zeros;
      out.values.resize(count);
      out.scales_f16.resize(groups);
      if (asym) out.zeros_f16.resize(groups);
      quantize_int8_gw(w, rows, cols, group_size, asym, out.values.data(), out.scales_f16.data(),
                       asym ? out.zeros_f16.data() : nullptr);
      break;
    }
    case WeightType::AWQ_INT4:
      out.qweight.resize(count / 8);
      out.qzeros.resize(groups / 8);
      out.scales_f16.resize(groups);
      quantize_awq_int4(w, rows, cols, group_size, out.qweight.data(), out.qzeros.data(), out.scales_f16.data());
      break;
  }
  return out;
}

}  // namespace qt::quant
