#include "runtime/cpu/q8_gemm_kernels.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace qt::rt {
namespace {

void panel_scalar(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                  const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                  int64_t y_stride, int64_t rows) {
  const int64_t ng = k / group;
  for (int64_t t = 0; t < tokens; ++t) {
    const int8_t* xt = x + t * x_stride;
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t g = 0; g < ng; ++g) {
        const uint8_t* wg = w + g * q8_group_bytes(group);
        int32_t s = 0;
        for (int64_t c = 0; c < group; ++c)
          s += int32_t(wg[(c / 4) * 64 + r * 4 + c % 4]) * int32_t(xt[g * group + c]);
        s -= 128 * x_qsum[t * xs_stride + g];
        acc = std::fma(float(s), q8_group_scales(w, group, g)[r] * x_scale[t * xs_stride + g], acc);
      }
      y[t * y_stride + r] = acc;
    }
  }
}

}  // namespace

void quantize_row_scalar(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum) {
  for (int64_t g = 0; g < k / group; ++g) {
    const float* xg = x + g * group;
    float amax = 0.0f;
    for (int64_t j = 0; j < group; ++j) amax = std::max(amax, std::fabs(xg[j]));
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    int32_t sum = 0;
    for (int64_t j = 0; j < group; ++j) {
      const int32_t v = std::clamp(static_cast<int32_t>(std::nearbyint(xg[j] * inv)), -127, 127);
      q[g * group + j] = static_cast<int8_t>(v);
      sum += v;
    }
    scale[g] = s;
    qsum[g] = sum;
  }
}

const Q8GemmKernels kScalarQ8Gemm = {Isa::kScalar, nullptr, panel_scalar, quantize_row_scalar, nullptr,
                                     DecodePrefetch::kNone};

void run_panels(const Q8GemmKernels& kernels, const uint8_t* w, int64_t count, int64_t k, int64_t group,
                const int8_t* x, int64_t x_stride, const float* x_scale, const int32_t* x_qsum, int64_t xs_stride,
                int64_t tokens, float* y, int64_t y_stride, int64_t rows) {
  if (kernels.panels)
    return kernels.panels(w, count, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  for (int64_t p = 0; p < count; ++p)
    kernels.panel(w + p * q8_panel_bytes(k, group), k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens,
                  y + p * kQ8PanelRows, y_stride, std::min(kQ8PanelRows, rows - p * kQ8PanelRows));
}

const char* tile_unit_name(TileUnit unit) {
  switch (unit) {
    case TileUnit::kNone: return "none";
    case TileUnit::kAmx: return "amx";
    case TileUnit::kAmxModel: return "amx-model";
  }
  return "?";
}

namespace {

const Q8GemmKernels& pick(DecodePrefetch p, const Q8GemmKernels& l2, const Q8GemmKernels& none,
                          const Q8GemmKernels& l1) {
  return p == DecodePrefetch::kNone ? none : p == DecodePrefetch::kL1 ? l1 : l2;
}

}  // namespace

const Q8GemmKernels& q8_gemm_kernels_for(Isa isa, TileUnit tiles, DecodePrefetch p) {
  if (tiles != TileUnit::kNone) {
    if (isa != Isa::kAvx512Vnni)
      throw Error(std::string("the AMX kernel converts its sums with AVX-512, not ") + isa_name(isa));
    if (tiles == TileUnit::kAmx) return pick(p, kAmxQ8Gemm, kAmxQ8GemmNoPrefetch, kAmxQ8GemmL1Prefetch);
    return pick(p, kAmxModelQ8Gemm, kAmxModelQ8GemmNoPrefetch, kAmxModelQ8GemmL1Prefetch);
  }
  switch (isa) {
    case Isa::kAvx512Vnni: return pick(p, kAvx512Q8Gemm, kAvx512Q8GemmNoPrefetch, kAvx512Q8GemmL1Prefetch);
    case Isa::kAvxVnni: return pick(p, kAvxVnniQ8Gemm, kAvxVnniQ8GemmNoPrefetch, kAvxVnniQ8GemmL1Prefetch);
    case Isa::kAvx2: return pick(p, kAvx2Q8Gemm, kAvx2Q8GemmNoPrefetch, kAvx2Q8GemmL1Prefetch);
    default: return kScalarQ8Gemm;  // no prefetch to choose
  }
}

}  // namespace qt::rt
