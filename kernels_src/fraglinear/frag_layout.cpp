#include "kernels_src/fraglinear/frag_layout.h"

#include <string>

#include "common/half.h"

namespace qt::kernels::frag {
namespace {

// The row of K, inside a 16-row tile, of the fragment register element lane t holds: element e of
// {2t, 2t+1, 2t+8, 2t+9}.
int64_t frag_row(int64_t t, int e) { return 2 * t + (e & 1) + 8 * (e >> 1); }

// Nibble position of element e (order above) of the fragment that sits first (second = +2) in an INT4 word.
constexpr int kNibble[4] = {0, 4, 1, 5};

}  // namespace

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
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t kt = 0; kt < ktiles; ++kt) {
      for (int64_t lane = 0; lane < 32; ++lane) {
        const int64_t g = lane / 4, t = lane % 4;
        for (int64_t w = 0; w < 4; ++w) {
          uint32_t word = 0;
          for (int64_t half = 0; half < 2; ++half) {
            const int64_t col = nt * kTileN + 8 * (2 * w + half) + g;
            // Padded columns have code 0 and zero 0, so (q - z) = 0.
            for (int e = 0; e < 4; ++e)
              word |= code(qweight, kt * kTileK + frag_row(t, e), col) << (4 * (kNibble[e] + 2 * half));
          }
          out.q[size_t((nt * ktiles + kt) * 128 + lane * 4 + w)] = word;
        }
      }
    }
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t grp = 0; grp < d.groups(); ++grp) {
      const int64_t base = (nt * d.groups() + grp);
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t t = 0; t < 4; ++t)
          for (int64_t i = 0; i < 4; ++i)
            for (int64_t j = 0; j < 2; ++j) {
              const int64_t col = nt * kTileN + 8 * (4 * r + i) + 2 * t + j;
              out.scales[size_t(base * 64 + 32 * r + 8 * t + 2 * i + j)] = col < d.n ? scales[grp * d.n + col] : 0;
            }
      for (int64_t g = 0; g < 8; ++g)
        for (int64_t h = 0; h < 2; ++h) {
          uint32_t word = 0;
          for (int64_t i = 0; i < 4; ++i) word |= code(qzeros, grp, nt * kTileN + 8 * (4 * h + i) + g) << (4 * i);
          out.zeros[size_t(base * 16 + 2 * g + h)] = word * 0x00010001u;  // both halves
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
      for (int64_t lane = 0; lane < 32; ++lane) {
        const int64_t g = lane / 4, t = lane % 4;
        for (int64_t f = 0; f < 8; ++f) {
          const int64_t col = nt * kTileN + 8 * f + g;
          uint32_t word = 0;
          for (int e = 0; e < 4; ++e) {
            // Padded columns hold the bias, so (u - 128) = 0.
            const uint32_t u = col < d.n ? code(kt * kTileK + frag_row(t, e), col) : 128u;
            word |= u << (8 * e);
          }
          out.q[size_t((nt * ktiles + kt) * 256 + (f / 4) * 128 + lane * 4 + f % 4)] = word;
        }
      }
  for (int64_t nt = 0; nt < d.n_tiles(); ++nt)
    for (int64_t grp = 0; grp < d.groups(); ++grp)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t t = 0; t < 4; ++t)
          for (int64_t i = 0; i < 4; ++i)
            for (int64_t j = 0; j < 2; ++j) {
              const int64_t col = nt * kTileN + 8 * (4 * r + i) + 2 * t + j;
              out.scales[size_t((nt * d.groups() + grp) * 64 + 32 * r + 8 * t + 2 * i + j)] =
                  col < d.n ? scale(grp, col) : 0;
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

}  // namespace qt::kernels::frag
