#include "models/quant/quantized_tensor.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "common/half.h"
#include "models/quant/awq_int4.h"
#include "models/quant/int8_gw.h"
#include "models/quant/q8_0.h"

namespace qt::quant {

QTensor QuantizedTensor::view() const {
  QTensor t;
  t.type = type;
  t.rows = rows;
  t.cols = cols;
  t.group_size = group_size;
  switch (type) {
    case WeightType::F32:
    case WeightType::F16:
    case WeightType::BF16:
      t.data = values.data();
      break;
    case WeightType::Q8_0:
      t.data = values.data();
      t.scales_f32 = scales_f32.data();
      break;
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM:
      t.data = values.data();
      t.scales_f16 = scales_f16.data();
      if (type == WeightType::INT8_GW_ASYM) t.zeros_f16 = zeros_f16.data();
      break;
    case WeightType::AWQ_INT4:
      t.data = qweight.data();
      t.qzeros = qzeros.data();
      t.scales_f16 = scales_f16.data();
      break;
  }
  return t;
}

QuantizedTensor quantize_tensor(const float* w, int64_t rows, int64_t cols, WeightType type, int32_t group_size) {
  QuantizedTensor out;
  out.type = type;
  out.rows = rows;
  out.cols = cols;
  const bool grouped = type == WeightType::Q8_0 || type == WeightType::INT8_GW_SYM ||
                       type == WeightType::INT8_GW_ASYM || type == WeightType::AWQ_INT4;
  out.group_size = grouped ? group_size : 0;
  if (rows <= 0 || cols <= 0) {
    throw Error("quantize_tensor: empty shape " + std::to_string(rows) + "x" + std::to_string(cols), kExitFailure);
  }
  if (grouped && (group_size <= 0 || cols % group_size != 0)) {
    throw Error(std::string("quantize_tensor: ") + weight_type_name(type) + " group size " +
                    std::to_string(group_size) + " does not divide K = " + std::to_string(cols), kExitFailure);
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
      const bool asym = type == WeightType::INT8_GW_ASYM;
      out.values.resize(count);
      out.scales_f16.resize(groups);
      if (asym) out.zeros_f16.resize(groups);
      quantize_int8_gw(w, rows, cols, group_size, asym, out.values.data(), out.scales_f16.data(),
                       asym ? out.zeros_f16.data() : nullptr);
      break;
    }
    case WeightType::AWQ_INT4:
      if (rows % 8 != 0) {
        throw Error("quantize_tensor: AWQ_INT4 needs N % 8 == 0, N = " + std::to_string(rows), kExitFailure);
      }
      out.qweight.resize(count / 8);
      out.qzeros.resize(groups / 8);
      out.scales_f16.resize(groups);
      quantize_awq_int4(w, rows, cols, group_size, out.qweight.data(), out.qzeros.data(), out.scales_f16.data());
      break;
  }
  return out;
}

}  // namespace qt::quant
