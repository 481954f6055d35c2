#include "models/core/dequantize_f16.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "common/parallel_ranges.h"

namespace qt {
namespace {

// Rows per tile of the in-major types (eight AWQ words) and input columns per tile: a tile's fp16 values
// (8 KB) and the lookup table stay in L1 while it is filled, then go out as 64 runs of 128 bytes.
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileCols = 64;

template <class T>
T load(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// float_to_half_bits (common/half.h) without branches, every case computed and the right one selected, so that
// the loops over a row vectorise: the same bits for every input (NaN, infinities, overflow, subnormals).
inline uint16_t half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3f000000u;
  const uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  uint32_t h = a < 0x38800000u ? sub : normal;
  h = a >= 0x477ff000u ? 0x7c00u : h;
  h = a > 0x7f800000u ? nan : h;
  return static_cast<uint16_t>(sign | h);
}

// Tile rows [n0, n1) x cols [k0, k1) written from tile[r][kk] (kTileCols per tile row) into out (rows from row0).
void store_tile(const uint16_t* tile, int64_t n0, int64_t n1, int64_t k0, int64_t k1, int64_t row0, int64_t cols,
                uint16_t* out) {
  for (int64_t n = n0; n < n1; ++n)
    std::memcpy(out + (n - row0) * cols + k0, tile + (n - n0) * kTileCols, size_t(k1 - k0) * 2);
}

// AWQ: each (group, row) has only 16 values, (q - z) * s for q = 0..15, so a tile looks its fp16 bits up in a
// table built from the reference's own expression whenever its group changes. Tiles cover whole words (8 rows);
// only the rows in [row0, row1) are stored.
void awq_rows(const QTensor& t, int64_t row0, int64_t row1, uint16_t* out) {
  const int64_t K = t.cols, N = t.rows, G = t.group_size, words = N / 8;
  constexpr int64_t kTileWords = kTileRows / 8;
  alignas(64) uint16_t tile[kTileRows * kTileCols];
  alignas(64) uint16_t table[kTileRows][16];
  for (int64_t j0 = row0 / 8; j0 * 8 < row1; j0 += kTileWords) {
    const int64_t j1 = std::min(words, j0 + kTileWords), tile_words = j1 - j0;
    const int64_t n0 = std::max(row0, j0 * 8), n1 = std::min(row1, j1 * 8);
    int64_t table_group = -1;
    for (int64_t k0 = 0; k0 < K; k0 += kTileCols) {
      const int64_t k1 = std::min(K, k0 + kTileCols);
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t g = k / G;
        if (g != table_group) {
          table_group = g;
          for (int64_t n = j0 * 8; n < j1 * 8; ++n) {
            const int z = int(awq_nibble(load<uint32_t>(t.qzeros, g * words + n / 8), n % 8));
            const float s = half_bits_to_float(load<uint16_t>(t.scales_f16, g * N + n));
            for (int q = 0; q < 16; ++q) table[n - j0 * 8][q] = float_to_half_bits(static_cast<float>(q - z) * s);
          }
        }
        const uint8_t* words_at = static_cast<const uint8_t*>(t.data) + (k * words + j0) * 4;
        uint16_t* column = tile + (k - k0);
        for (int64_t j = 0; j < tile_words; ++j) {
          uint32_t w;
          std::memcpy(&w, words_at + j * 4, 4);
          for (int e = 0; e < 8; ++e) column[(8 * j + e) * kTileCols] = table[8 * j + e][awq_nibble(w, e)];
        }
      }
      for (int64_t n = n0; n < n1; ++n)
        std::memcpy(out + (n - row0) * K + k0, tile + (n - j0 * 8) * kTileCols, size_t(k1 - k0) * 2);
    }
  }
}

// INT8 group-wise: q uint8 [K][N] with +128 bias, scales (and zeros) [K/G][N]; the reference's expression,
// (q - 128) * s, then + z for the asymmetric type, each rounded in fp32.
template <bool kAsym>
void int8_gw_rows(const QTensor& t, int64_t row0, int64_t row1, uint16_t* out) {
  const int64_t K = t.cols, N = t.rows, G = t.group_size;
  const auto* q = static_cast<const uint8_t*>(t.data);
  uint16_t tile[kTileRows * kTileCols];
  float s[kTileRows], z[kTileRows];
  for (int64_t n0 = row0; n0 < row1; n0 += kTileRows) {
    const int64_t n1 = std::min(row1, n0 + kTileRows);
    int64_t group = -1;
    for (int64_t k0 = 0; k0 < K; k0 += kTileCols) {
      const int64_t k1 = std::min(K, k0 + kTileCols);
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t g = k / G;
        if (g != group) {
          group = g;
          for (int64_t n = n0; n < n1; ++n) {
            s[n - n0] = half_bits_to_float(load<uint16_t>(t.scales_f16, g * N + n));
            z[n - n0] = kAsym ? half_bits_to_float(load<uint16_t>(t.zeros_f16, g * N + n)) : 0.0f;
          }
        }
        const uint8_t* row = q + k * N;
        for (int64_t n = n0; n < n1; ++n) {
          const float v = static_cast<float>(static_cast<int>(row[n]) - 128) * s[n - n0];
          tile[(n - n0) * kTileCols + (k - k0)] = half_bits(kAsym ? v + z[n - n0] : v);
        }
      }
      store_tile(tile, n0, n1, k0, k1, row0, K, out);
    }
  }
}

// Q8_0 is row-major with its scales along the row: a group at a time, q * s.
void q8_0_rows(const QTensor& t, int64_t row0, int64_t row1, uint16_t* out) {
  const int64_t K = t.cols, G = t.group_size;
  const auto* q = static_cast<const int8_t*>(t.data);
  for (int64_t n = row0; n < row1; ++n) {
    uint16_t* o = out + (n - row0) * K;
    for (int64_t k0 = 0; k0 < K; k0 += G) {
      const float s = load<float>(t.scales_f32, (n * K + k0) / G);
      for (int64_t k = k0; k < k0 + G; ++k) o[k] = half_bits(static_cast<float>(q[n * K + k]) * s);
    }
  }
}

// Any other layout (the float types, a Q8_0 group that does not divide K): the reference's rows, rounded.
void reference_rows(const QTensor& t, int64_t row0, int64_t row1, uint16_t* out) {
  std::vector<float> row(size_t(t.cols));
  for (int64_t n = row0; n < row1; ++n) {
    dequantize_row(t, n, row.data());
    for (int64_t k = 0; k < t.cols; ++k) out[(n - row0) * t.cols + k] = float_to_half_bits(row[size_t(k)]);
  }
}

bool groups_fit(const QTensor& t) { return t.group_size > 0 && t.cols % t.group_size == 0; }

}  // namespace

void dequantize_rows_f16(const QTensor& t, int64_t row0, int64_t row1, uint16_t* out) {
  if (row1 <= row0) return;
  switch (t.type) {
    case WeightType::AWQ_INT4:
      if (groups_fit(t) && t.rows % 8 == 0) return awq_rows(t, row0, row1, out);
      break;
    case WeightType::INT8_GW_SYM:
      if (groups_fit(t)) return int8_gw_rows<false>(t, row0, row1, out);
      break;
    case WeightType::INT8_GW_ASYM:
      if (groups_fit(t)) return int8_gw_rows<true>(t, row0, row1, out);
      break;
    case WeightType::Q8_0:
      if (groups_fit(t)) return q8_0_rows(t, row0, row1, out);
      break;
    default: break;
  }
  reference_rows(t, row0, row1, out);
}

void dequantize_f16(const QTensor& t, uint16_t* out) {
  // Blocks of whole tiles (whole AWQ words), so that no two threads share a tile.
  const int64_t blocks = (t.rows + kTileRows - 1) / kTileRows;
  parallel_ranges(blocks, double(t.rows) * double(t.cols), [&](int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * kTileRows, r1 = std::min(t.rows, b1 * kTileRows);
    dequantize_rows_f16(t, r0, r1, out + r0 * t.cols);
  });
}

}  // namespace qt
