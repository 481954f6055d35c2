#include "kernels_src/fraglinear/frag_layout.h"

#include <string>

#include "common/error.h"
#include "common/half.h"

namespace qt::kernels::frag {

using frag_map::element_shift;
using frag_map::frag_col;
using frag_map::frag_row;
using frag_map::scale_col;
using frag_map::tile_word;
using frag_map::zero_col;
using frag_map::zero_word;

std::string frag_dims_check(const FragDims& d) {
  if (d.bits != 4 && d.bits != 8) return "bits must be 4 or 8";
  if (d.n < 1 || d.k < 1 || d.group < 1) return "N, K and G must be positive";
  if (d.n % 8) return "N must be a multiple of 8";
  if (d.group % kTileK) return "the group size must be a multiple of 16";
  if (d.k % d.group) return "K must be a multiple of the group size";
  return "";
}

FragWeights repack_awq(const FragDims& d, const int32_t* qweight, const int32_t* qzeros, const uint16_t* scales) {
  const int64_t words_per_row = d.n / 8;
  auto code = [&](const int32_t* a, int64_t row, int64_t col) -> uint32_t {
    if (col >= d.n) return 0;
    return (uint32_t(a[row * words_per_row + col / 8]) >> awq_shift(col % 8)) & 15u;
  };
  FragWeights out;
  out.q.assign(size_t(d.weight_words()), 0);
  out.scales.assign(size_t(d.scale_halves()), 0);
  out.zeros.assign(size_t(d.zero_words()), 0);
  const int64_t ktiles = d.k / kTileK;
  // Every element of every fragment, placed by the map: padded columns have code 0 and zero 0, so (q - z) = 0.
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t kt = 0; kt < ktiles; ++kt)
      for (int lane = 0; lane < 32; ++lane)
        for (int f = 0; f < 8; ++f)
          for (int e = 0; e < 4; ++e) {
            const int64_t col = nt * kTileN + frag_col(f, lane / 4);
            out.q[size_t((nt * ktiles + kt) * d.tile_words() + tile_word(4, lane, f))] |=
                code(qweight, kt * kTileK + frag_row(lane % 4, e), col) << element_shift(4, f, e);
          }
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t grp = 0; grp < d.groups(); ++grp) {
      const int64_t run = nt * d.groups() + grp;
      for (int p = 0; p < frag_map::kScalesPerRun; ++p) {
        const int64_t col = nt * kTileN + scale_col(p);
        out.scales[size_t(run * frag_map::kScalesPerRun + p)] = col < d.n ? scales[grp * d.n + col] : 0;
      }
      for (int g = 0; g < 8; ++g)
        for (int h = 0; h < 2; ++h) {
          uint32_t word = 0;
          for (int i = 0; i < 4; ++i) word |= code(qzeros, grp, nt * kTileN + zero_col(g, h, i)) << (4 * i);
          out.zeros[size_t(run * frag_map::kZeroWordsPerRun + zero_word(g, h))] = word * 0x00010001u;  // both halves
        }
    }
  return out;
}

namespace {

// The 8-bit layout from any source: `code(row, col)` the biased code u of row `row` (K) and column `col` (N),
// `scale(group, col)` its fp16 scale bits; both asked only for col < d.n.
template <class Code, class Scale>
FragWeights repack_8bit(const FragDims& d, Code code, Scale scale) {
  FragWeights out;
  out.q.assign(size_t(d.weight_words()), 0);
  out.scales.assign(size_t(d.scale_halves()), 0);
  const int64_t ktiles = d.k / kTileK;
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t kt = 0; kt < ktiles; ++kt)
      for (int lane = 0; lane < 32; ++lane)
        for (int f = 0; f < 8; ++f)
          for (int e = 0; e < 4; ++e) {
            // Padded columns hold the bias, so (u - 128) = 0.
            const int64_t col = nt * kTileN + frag_col(f, lane / 4);
            const uint32_t u = col < d.n ? code(kt * kTileK + frag_row(lane % 4, e), col) : 128u;
            out.q[size_t((nt * ktiles + kt) * d.tile_words() + tile_word(8, lane, f))] |= u << element_shift(8, f, e);
          }
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t grp = 0; grp < d.groups(); ++grp)
      for (int p = 0; p < frag_map::kScalesPerRun; ++p) {
        const int64_t col = nt * kTileN + scale_col(p);
        out.scales[size_t((nt * d.groups() + grp) * frag_map::kScalesPerRun + p)] = col < d.n ? scale(grp, col) : 0;
      }
  return out;
}

}  // namespace

FragWeights repack_int8(const FragDims& d, const uint8_t* q, const uint16_t* scales) {
  return repack_8bit(
      d, [&](int64_t row, int64_t col) { return uint32_t(q[row * d.n + col]); },
      [&](int64_t grp, int64_t col) { return scales[grp * d.n + col]; });
}

FragWeights repack_q8_0(const FragDims& d, const int8_t* q, const float* scales) {
  return repack_8bit(
      d, [&](int64_t row, int64_t col) { return uint32_t(int32_t(q[col * d.k + row]) + 128); },
      [&](int64_t grp, int64_t col) { return float_to_half_bits(scales[col * d.groups() + grp]); });
}

FragWeights repack(const QTensor& t) {
  const FragDims d{t.rows, t.cols, t.group_size, frag_layout_bits(t.type)};
  switch (t.type) {
    case WeightType::AWQ_INT4:
      return repack_awq(d, static_cast<const int32_t*>(t.array(WeightArray::QWeight)),
                        static_cast<const int32_t*>(t.array(WeightArray::QZeros)), t.scales_f16);
    case WeightType::INT8_GW_SYM:
      return repack_int8(d, static_cast<const uint8_t*>(t.data), t.scales_f16);
    case WeightType::Q8_0:
      return repack_q8_0(d, static_cast<const int8_t*>(t.data), t.scales_f32);
    default:
      throw Error(std::string("the frag layout does not hold ") + weight_type_name(t.type) + " weights");
  }
}

}  // namespace qt::kernels::frag
