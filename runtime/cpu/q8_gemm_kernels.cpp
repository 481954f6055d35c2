#include "runtime/cpu/q8_gemm_kernels.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "common/half.h"

namespace qt::rt {
namespace {

// The two panel formats as the scalar kernel reads them: a group's bytes, the products of a 64-byte step (`x` at
// the step's first column) added to the rows' sums, what the stored weights carry beyond q (Q8: the +128; U4: the
// zero point), taken out as that times the activations' sum, and a row's scale.
struct Q8Format {
  static constexpr int64_t kStepColumns = 4;
  static int64_t group_bytes(int64_t group) { return q8_group_bytes(group); }
  static void add_step(const uint8_t* step, const int8_t* x, int32_t* s) {
    for (int64_t r = 0; r < kQ8PanelRows; ++r)
      for (int64_t j = 0; j < 4; ++j) s[r] += int32_t(step[r * 4 + j]) * x[j];
  }
  static int32_t offset(const uint8_t*, int64_t, int64_t, int64_t) { return 128; }
  static float scale(const uint8_t* w, int64_t group, int64_t g, int64_t r) { return q8_group_scales(w, group, g)[r]; }
};

struct U4Format {
  static constexpr int64_t kStepColumns = kU4StepColumns;
  static int64_t group_bytes(int64_t group) { return u4_group_bytes(group); }
  static void add_step(const uint8_t* step, const int8_t* x, int32_t* s) {
    for (int64_t r = 0; r < kQ8PanelRows; ++r)
      for (int64_t j = 0; j < 4; ++j) s[r] += int32_t(step[r * 4 + j] & 15) * x[j] + int32_t(step[r * 4 + j] >> 4) * x[4 + j];
  }
  static int32_t offset(const uint8_t* w, int64_t group, int64_t g, int64_t r) { return u4_group_zeros(w, group, g)[r]; }
  static float scale(const uint8_t* w, int64_t group, int64_t g, int64_t r) {
    return half_bits_to_float(u4_group_scales(w, group, g)[r]);
  }
};

// Defines `panel` and `panel_u4` for the SIMD kernels. The panel's 16 rows at once, step by step, so that the
// weights are read in the order they are stored (rows past `rows` hold weight 0 and are not stored).
template <class Format>
void panel_scalar(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                  const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                  int64_t y_stride, int64_t rows) {
  const int64_t ng = k / group;
  for (int64_t t = 0; t < tokens; ++t) {
    const int8_t* xt = x + t * x_stride;
    float acc[kQ8PanelRows] = {};
    for (int64_t g = 0; g < ng; ++g) {
      const uint8_t* wg = w + g * Format::group_bytes(group);
      int32_t s[kQ8PanelRows] = {};
      for (int64_t c = 0; c < group; c += Format::kStepColumns)
        Format::add_step(wg + c / Format::kStepColumns * 64, xt + g * group + c, s);
      for (int64_t r = 0; r < rows; ++r) {
        s[r] -= Format::offset(w, group, g, r) * x_qsum[t * xs_stride + g];
        acc[r] = std::fma(float(s[r]), Format::scale(w, group, g, r) * x_scale[t * xs_stride + g], acc[r]);
      }
    }
    for (int64_t r = 0; r < rows; ++r) y[t * y_stride + r] = acc[r];
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

const Q8GemmKernels kScalarQ8Gemm = {Isa::kScalar, nullptr, panel_scalar<Q8Format>, quantize_row_scalar, nullptr,
                                     DecodePrefetch::kNone, panel_scalar<U4Format>};

void run_panels(const Q8GemmKernels& kernels, const uint8_t* w, int64_t count, int64_t k, int64_t group,
                const int8_t* x, int64_t x_stride, const float* x_scale, const int32_t* x_qsum, int64_t xs_stride,
                int64_t tokens, float* y, int64_t y_stride, int64_t rows) {
  if (kernels.panels)
    return kernels.panels(w, count, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  for (int64_t p = 0; p < count; ++p)
    kernels.panel(w + p * q8_panel_bytes(k, group), k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens,
                  y + p * kQ8PanelRows, y_stride, std::min(kQ8PanelRows, rows - p * kQ8PanelRows));
}

void run_panels(const Q8GemmKernels& kernels, PanelFormat format, const uint8_t* w, int64_t count, int64_t k,
                int64_t group, const int8_t* x, int64_t x_stride, const float* x_scale, const int32_t* x_qsum,
                int64_t xs_stride, int64_t tokens, float* y, int64_t y_stride, int64_t rows) {
  if (format == PanelFormat::kQ8)
    return run_panels(kernels, w, count, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  for (int64_t p = 0; p < count; ++p)
    kernels.panel_u4(w + p * u4_panel_bytes(k, group), k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens,
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
