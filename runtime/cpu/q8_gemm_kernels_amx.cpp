// AMX-INT8 Q8_0 GEMM. The panel layout of q8_gemm_kernels.h is already what TDPBSUD takes as its B operand:
// one 64-byte row per 4 columns, holding those 4 columns of the panel's 16 output rows, so a weight tile is
// `depth / 4` consecutive rows of the panel and the repacked weights serve both this kernel and the VNNI one
// (no second copy). A (16 tokens x depth int8 activations) times B gives C, 16 tokens x 16 output rows of
// int32 sums for one weight group, which add_group_sums turns into floats exactly as the VNNI kernel does;
// so for the same inputs the two give the same bits.
//
// The kernel is one template over the tile instructions (amx_tiles.h): kAmxQ8Gemm runs the real ones and
// kAmxModelQ8Gemm the scalar model, which is how this code is tested on CPUs without AMX.
#include <immintrin.h>

#include <initializer_list>

#include "runtime/cpu/amx_hw_tiles.h"
#include "runtime/cpu/amx_tile_model.h"
#include "runtime/cpu/q8_gemm_group_avx512.h"
#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {
namespace {

static_assert(kQ8PanelRows * 4 == kTileMaxColsb, "a 64-byte row of the panel is one row of a weight tile");
static_assert(kQ8PanelRows * sizeof(int32_t) == kTileMaxColsb, "a row of C holds the panel's 16 int32 sums");

// Tile numbers. Two sets take alternate weight groups, so that the products of one group can run while the
// sums of the one before are stored and converted (a tile cannot be reused before its store has read it).
constexpr int kC0 = 0, kC1 = 1;  // sums: tokens x 16 output rows of int32
constexpr int kA0 = 2, kA1 = 3;  // activations: tokens x depth int8
constexpr int kB0 = 4, kB1 = 5;  // weights: depth / 4 rows of the panel
constexpr int64_t kBlock = kTileMaxRows;  // tokens per tile product

// Fewer tokens than this go to the VNNI kernel. A prediction from instruction counts, not a measurement:
// per weight group, a VNNI token costs about 16 vpdpbusd (8 cycles at two a cycle), while a tile product
// costs about the same 40-50 cycles (loads, TDPBSUD, store, 16 rows of conversion) whatever its rows, so the
// tiles win from about 6 tokens.
constexpr int64_t kAmxMinTokens = 8;

// The K bytes one product covers: the whole group when it fits a row of A, else the largest multiple of 4
// that divides the group and does.
int64_t tile_depth(int64_t group) {
  if (group <= kTileMaxColsb) return group;
  int64_t d = kTileMaxColsb;
  while (group % d != 0) d -= 4;
  return d;
}

TileConfig gemm_config(int64_t tokens, int64_t depth) {
  TileConfig c;
  c.palette = 1;
  for (int t : {kC0, kC1}) c.rows[t] = uint8_t(tokens), c.colsb[t] = uint16_t(kQ8PanelRows * sizeof(int32_t));
  for (int t : {kA0, kA1}) c.rows[t] = uint8_t(tokens), c.colsb[t] = uint16_t(depth);
  for (int t : {kB0, kB1}) c.rows[t] = uint8_t(depth / 4), c.colsb[t] = uint16_t(kTileMaxColsb);
  return c;
}

// C = the sums over weight group g of the block's tokens against the panel's 16 rows.
template <int C, int A, int B, class Tiles>
void multiply(Tiles& tiles, const uint8_t* w, const int8_t* x, int64_t x_stride, int64_t group, int64_t g,
              int64_t depth) {
  const uint8_t* wg = w + g * q8_group_bytes(group);
  tiles.template zero<C>();
  for (int64_t c = 0; c < group; c += depth) {
    tiles.template load<A>(x + g * group + c, x_stride);
    tiles.template load<B>(wg + c * kQ8PanelRows, kTileMaxColsb);
    tiles.template dpbsud<C, A, B>();
  }
}

// One block of `tokens` (<= 16) tokens against one panel, the tiles configured for that many.
template <class Tiles>
void block(Tiles& tiles, const uint8_t* w, int64_t k, int64_t group, int64_t depth,
           const int8_t* x, int64_t x_stride, const float* x_scale, const int32_t* x_qsum, int64_t xs_stride,
           int64_t tokens, float* y, int64_t y_stride, __mmask16 rows) {
  alignas(64) int32_t sums[2][kBlock][kQ8PanelRows];
  __m512 acc[kBlock];
  for (int t = 0; t < kBlock; ++t) acc[t] = _mm512_setzero_ps();
  auto convert = [&](int32_t (*s)[kQ8PanelRows], int64_t g) {
    const __m512 ws = _mm512_loadu_ps(q8_group_scales(w, group, g));
    for (int t = 0; t < kBlock; ++t)
      if (t < tokens)
        acc[t] = add_group_sums(acc[t], _mm512_load_si512(s[t]), ws, x_qsum[t * xs_stride + g],
                                x_scale[t * xs_stride + g]);
  };
  const int64_t ng = k / group;
  multiply<kC0, kA0, kB0>(tiles, w, x, x_stride, group, 0, depth);
  for (int64_t g = 0; g < ng; g += 2) {
    if (g + 1 < ng) multiply<kC1, kA1, kB1>(tiles, w, x, x_stride, group, g + 1, depth);
    tiles.template store<kC0>(sums[0], sizeof(sums[0][0]));
    convert(sums[0], g);
    if (g + 1 == ng) break;
    if (g + 2 < ng) multiply<kC0, kA0, kB0>(tiles, w, x, x_stride, group, g + 2, depth);
    tiles.template store<kC1>(sums[1], sizeof(sums[1][0]));
    convert(sums[1], g + 1);
  }
  for (int t = 0; t < kBlock; ++t)
    if (t < tokens) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
}

template <class Tiles>
void panel_tiles(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                 const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                 int64_t y_stride, int64_t rows) {
  int64_t t = 0;
  if (group % 4 == 0) {
    Tiles& tiles = Tiles::this_thread();
    const int64_t depth = tile_depth(group);
    const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
    int64_t configured = 0;  // rows of the configuration loaded, 0 for none
    for (; tokens - t >= kAmxMinTokens; t += kBlock) {
      const int64_t n = tokens - t < kBlock ? tokens - t : kBlock;
      if (n != configured) {
        tiles.configure(gemm_config(n, depth));
        configured = n;
      }
      block(tiles, w, k, group, depth, x + t * x_stride, x_stride, x_scale + t * xs_stride,
            x_qsum + t * xs_stride, xs_stride, n, y + t * y_stride, y_stride, mask);
    }
    // Back to the init state: a thread holding tile data makes every context switch save 8 KB more.
    if (configured) tiles.release();
    if (t >= tokens) return;
  }
  kAvx512Q8Gemm.panel(w, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride,
                      x_qsum + t * xs_stride, xs_stride, tokens - t, y + t * y_stride, y_stride, rows);
}

// The activations are quantized as for the VNNI kernel (a function here, not its table's pointer, so that these
// tables are constants).
void quantize_row_amx(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum) {
  kAvx512Q8Gemm.quantize_row(x, k, group, q, scale, qsum);
}

}  // namespace

const Q8GemmKernels kAmxQ8Gemm = {Isa::kAvx512Vnni, "amx-int8", panel_tiles<AmxHwTiles>, quantize_row_amx};
const Q8GemmKernels kAmxModelQ8Gemm = {Isa::kAvx512Vnni, "amx-model", panel_tiles<AmxTileModel>, quantize_row_amx};

}  // namespace qt::rt
