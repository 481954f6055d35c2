// AMX-INT8 Q8_0 GEMM. The panel layout of q8_gemm_kernels.h is already what TDPBSUD takes as its B operand:
// one 64-byte row per 4 columns, holding those 4 columns of the panel's 16 output rows, so a weight tile is
// `depth / 4` consecutive rows of the panel and the repacked weights serve both this kernel and the VNNI one
// (no second copy). A (16 tokens x depth int8 activations) times B gives C, 16 tokens x 16 output rows of
// int32 sums for one weight group, which add_group_sums turns into floats exactly as the VNNI kernel does;
// so for the same inputs the two give the same bits. AWQ's U4 panels are unpacked into that layout (bytes 0-15,
// their zero points in place of the 128) once a panel and call, and take the same blocks (panel_u4_tiles).
//
// The kernel is one template over the tile instructions (amx_tiles.h): kAmxQ8Gemm runs the real ones and
// kAmxModelQ8Gemm the scalar model, which is how this code is tested on CPUs without AMX.
//
// What bounds it, measured on an AMX Xeon (2-core VM, 30 Nov 2026; TSC cycles per 16 tokens x 16 rows x one
// group of 32, best of 15 runs of a 512 x 1024 x 3072 GEMM, figures within about 10 % from run to run):
// TDPBSUD alone 12; the tile work of a group (its loads, product and store) about 50; the conversion of its
// sums to floats about 40; both together about 90: on that machine the two do not overlap, whatever their
// order or distance. The previous form of this kernel (two sums tiles, TILEZERO, each group converted right
// after its store) took about 110, the VNNI kernel about 140.
#include <immintrin.h>

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "runtime/cpu/amx_hw_tiles.h"
#include "runtime/cpu/amx_tile_model.h"
#include "runtime/cpu/q8_gemm_group_avx512.h"
#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {
namespace {

static_assert(kQ8PanelRows * 4 == kTileMaxColsb, "a 64-byte row of the panel is one row of a weight tile");
static_assert(kQ8PanelRows * sizeof(int32_t) == kTileMaxColsb, "a row of C holds the panel's 16 int32 sums");

// Tile numbers. Four sums tiles take the weight groups in turn, so a group's product is two groups old
// before its sums are stored and three before they are converted: TDPBSUD's result comes tens of cycles
// after it issues, and a tile cannot be stored, or reused, before that. Two pairs of activation and weight
// tiles alternate, so the next group's loads need not wait for the product reading the last ones.
constexpr int kSumTiles = 4;
constexpr int kA0 = 4, kB0 = 6;  // activations: tokens x depth int8; weights: depth / 4 rows of the panel
constexpr int kStoreLag = 2, kConvertLag = 3;
constexpr int64_t kBlock = kTileMaxRows;  // tokens per tile product

// Fewer tokens than this go to the VNNI kernel. Chosen from instruction counts (a VNNI token about 8 cycles a
// group of 32, a block of tiles 40-50 whatever its tokens). The measurements above give a block about 90 cycles
// and a VNNI token about 9, which puts the break-even nearer 10 tokens; only a block of 8 or 9 is affected
// (the last block of a prompt), and either kernel gives the same bits.
constexpr int64_t kAmxMinTokens = 8;

// A sums tile starts from these zeros, loaded: on an AMX Xeon (2-core VM, 30 Nov 2026) TILEZERO before each
// product cost about 27 cycles a product more than TILELOADD of this block did (a loop of four independent
// zero + TDPBSUD chains: 39 against 20 TSC cycles a product; TDPBSUD alone 12).
alignas(64) constexpr int32_t kZeroSums[kTileMaxRows][kTileMaxColsb / sizeof(int32_t)] = {};

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
  for (int t = 0; t < kSumTiles; ++t) c.rows[t] = uint8_t(tokens), c.colsb[t] = uint16_t(kQ8PanelRows * sizeof(int32_t));
  for (int t : {kA0, kA0 + 1}) c.rows[t] = uint8_t(tokens), c.colsb[t] = uint16_t(depth);
  for (int t : {kB0, kB0 + 1}) c.rows[t] = uint8_t(depth / 4), c.colsb[t] = uint16_t(kTileMaxColsb);
  return c;
}

// One block of at most 16 tokens against one panel, the tiles configured for `tokens` rows. Full is a block of
// 16, whose 16 accumulators the compiler keeps in registers: they are a local of run(), every index known
// once the loops unroll, and never in memory the tile instructions' "memory" clobbers could reach.
template <class Tiles, bool Full>
struct Block {
  Tiles& tiles;
  const uint8_t* w;
  int64_t group, depth, ng;
  const int8_t* x;
  int64_t x_stride;
  const float* x_scale;
  const int32_t* x_qsum;
  int64_t xs_stride, tokens;
  alignas(64) int32_t sums[2][kBlock][kQ8PanelRows];
  // A U4 panel's zero points, 16 a group (unpack_u4), taken out of the sums in place of the Q8 bytes' 128; null
  // for a Q8 panel.
  const int32_t* zeros = nullptr;
  using Acc = __m512[kBlock];

  // Step g of the pipeline, on sums tile J = g % 4: the product of group g, the store of group g - 2 and the
  // conversion of group g - 3 (stored a step earlier, so its loads do not wait on the store just issued).
  template <int J>
  [[gnu::always_inline]] void step(Acc& acc, int64_t g) {
    constexpr int c = J, a = kA0 + (J & 1), b = kB0 + (J & 1);
    if (g < ng) {
      tiles.template load<c>(kZeroSums, sizeof(kZeroSums[0]));
      const uint8_t* wg = w + g * q8_group_bytes(group);
      for (int64_t d = 0; d < group; d += depth) {
        tiles.template load<a>(x + g * group + d, x_stride);
        tiles.template load<b>(wg + d * kQ8PanelRows, kTileMaxColsb);
        tiles.template dpbsud<c, a, b>();
      }
    }
    const int64_t stored = g - kStoreLag, converted = g - kConvertLag;
    if (stored >= 0 && stored < ng) tiles.template store<(J + kSumTiles - kStoreLag) % kSumTiles>(sums[stored & 1], sizeof(sums[0][0]));
    if (converted >= 0 && converted < ng) convert(acc, converted);
  }

  [[gnu::always_inline]] void convert(Acc& acc, int64_t g) {
    const int32_t (*s)[kQ8PanelRows] = sums[g & 1];
    const __m512 ws = _mm512_loadu_ps(q8_group_scales(w, group, g));
    if (zeros) {
      const __m512i zero = _mm512_loadu_si512(zeros + kQ8PanelRows * g);
#pragma GCC unroll 16
      for (int t = 0; t < kBlock; ++t)
        if (Full || t < tokens) {
          const __m512i offset = _mm512_mullo_epi32(zero, _mm512_set1_epi32(x_qsum[t * xs_stride + g]));
          acc[t] = add_exact_sums(acc[t], _mm512_sub_epi32(_mm512_load_si512(s[t]), offset), ws,
                                  x_scale[t * xs_stride + g]);
        }
      return;
    }
#pragma GCC unroll 16
    for (int t = 0; t < kBlock; ++t)
      if (Full || t < tokens)
        acc[t] = add_group_sums(acc[t], _mm512_load_si512(s[t]), ws, x_qsum[t * xs_stride + g],
                                x_scale[t * xs_stride + g]);
  }

  void run(float* y, int64_t y_stride, __mmask16 rows) {
    Acc acc;
#pragma GCC unroll 16
    for (int t = 0; t < kBlock; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng + kConvertLag; g += kSumTiles) {
      step<0>(acc, g);
      step<1>(acc, g + 1);
      step<2>(acc, g + 2);
      step<3>(acc, g + 3);
    }
#pragma GCC unroll 16
    for (int t = 0; t < kBlock; ++t)
      if (Full || t < tokens) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
  }
};
static_assert(kSumTiles == 4, "Block::run unrolls the steps by the sums tiles");

// The blocks of 16 tokens (and a last one of kAmxMinTokens or more) of one Q8-layout panel on the tiles, `zeros` as
// in Block. Returns the first token left, for the VNNI kernel.
template <class Tiles>
int64_t tile_blocks(const uint8_t* w, const int32_t* zeros, int64_t k, int64_t group, const int8_t* x,
                    int64_t x_stride, const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens,
                    float* y, int64_t y_stride, int64_t rows) {
  Tiles& tiles = Tiles::this_thread();
  const int64_t depth = tile_depth(group);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  int64_t configured = 0;  // rows of the configuration loaded, 0 for none
  int64_t t = 0;
  for (; tokens - t >= kAmxMinTokens; t += kBlock) {
    const int64_t n = tokens - t < kBlock ? tokens - t : kBlock;
    if (n != configured) {
      tiles.configure(gemm_config(n, depth));
      configured = n;
    }
    auto run = [&](auto full) {
      Block<Tiles, decltype(full)::value>{tiles,    w,     group, depth, k / group, x + t * x_stride, x_stride,
                                          x_scale + t * xs_stride, x_qsum + t * xs_stride, xs_stride, n, {}, zeros}
          .run(y + t * y_stride, y_stride, mask);
    };
    n == kBlock ? run(std::true_type{}) : run(std::false_type{});
  }
  // Back to the init state: a thread holding tile data makes every context switch save 8 KB more.
  if (configured) tiles.release();
  return t;
}

// `Few`: the kernels of fewer than kAmxMinTokens tokens (decode among them), with or without decode prefetch.
template <class Tiles, const Q8GemmKernels& Few>
void panel_tiles(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                 const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                 int64_t y_stride, int64_t rows) {
  const int64_t t = group % 4 == 0 ? tile_blocks<Tiles>(w, nullptr, k, group, x, x_stride, x_scale, x_qsum,
                                                         xs_stride, tokens, y, y_stride, rows)
                                    : 0;
  if (t < tokens)
    Few.panel(w, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride, x_qsum + t * xs_stride, xs_stride,
              tokens - t, y + t * y_stride, y_stride, rows);
}

// A U4 panel as the tiles take a Q8 one: its nibbles as bytes (0-15, without the Q8 bytes' +128), a step's low
// nibbles one 64-byte row and its high nibbles the next, its scales as floats after each group, and its zero points
// as int32, 16 a group. Unpacked once a panel and call, so every block of tokens reads the same bytes.
void unpack_u4(const uint8_t* w, int64_t k, int64_t group, uint8_t* q8, int32_t* zeros) {
  const __m512i nibble = _mm512_set1_epi8(15);
  for (int64_t g = 0; g < k / group; ++g) {
    const uint8_t* src = w + g * u4_group_bytes(group);
    uint8_t* dst = q8 + g * q8_group_bytes(group);
    for (int64_t s = 0; s < group / kU4StepColumns; ++s) {
      const __m512i v = _mm512_loadu_si512(src + s * 64);
      _mm512_storeu_si512(dst + 2 * s * 64, _mm512_and_si512(v, nibble));
      _mm512_storeu_si512(dst + (2 * s + 1) * 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    }
    _mm512_storeu_ps(dst + group * kQ8PanelRows,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u4_group_scales(w, group, g)))));
    _mm512_storeu_si512(zeros + kQ8PanelRows * g,
                        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u4_group_zeros(w, group, g)))));
  }
}

// U4 panels: enough tokens on the tiles, over the panel unpacked; the rest (decode among them) on `Few`. The sums
// are the VNNI kernel's and so are the float steps (add_exact_sums on the sums less zero x the activations' sum),
// so either gives the same bits.
template <class Tiles, const Q8GemmKernels& Few>
void panel_u4_tiles(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                    const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                    int64_t y_stride, int64_t rows) {
  int64_t t = 0;
  if (tokens >= kAmxMinTokens && group % kU4StepColumns == 0) {
    thread_local std::vector<uint8_t> q8;
    thread_local std::vector<int32_t> zeros;
    q8.resize(size_t(q8_panel_bytes(k, group)));
    zeros.resize(size_t(k / group * kQ8PanelRows));
    unpack_u4(w, k, group, q8.data(), zeros.data());
    t = tile_blocks<Tiles>(q8.data(), zeros.data(), k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y,
                           y_stride, rows);
  }
  if (t < tokens)
    Few.panel_u4(w, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride, x_qsum + t * xs_stride,
                 xs_stride, tokens - t, y + t * y_stride, y_stride, rows);
}

// The activations are quantized as for the VNNI kernel (a function here, not its table's pointer, so that these
// tables are constants).
void quantize_row_amx(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum) {
  kAvx512Q8Gemm.quantize_row(x, k, group, q, scale, qsum);
}

// A table of the tile kernel over `Few`, the VNNI table that takes the tokens too few for a tile (decode among
// them), with that table's decode prefetch `p`.
template <class Tiles, const Q8GemmKernels& Few>
constexpr Q8GemmKernels amx_table(const char* unit, DecodePrefetch p) {
  return {Isa::kAvx512Vnni, unit, panel_tiles<Tiles, Few>, quantize_row_amx, nullptr, p, panel_u4_tiles<Tiles, Few>};
}

}  // namespace

const Q8GemmKernels kAmxQ8Gemm = amx_table<AmxHwTiles, kAvx512Q8Gemm>("amx-int8", DecodePrefetch::kL2);
const Q8GemmKernels kAmxModelQ8Gemm = amx_table<AmxTileModel, kAvx512Q8Gemm>("amx-model", DecodePrefetch::kL2);
const Q8GemmKernels kAmxQ8GemmNoPrefetch =
    amx_table<AmxHwTiles, kAvx512Q8GemmNoPrefetch>("amx-int8", DecodePrefetch::kNone);
const Q8GemmKernels kAmxModelQ8GemmNoPrefetch =
    amx_table<AmxTileModel, kAvx512Q8GemmNoPrefetch>("amx-model", DecodePrefetch::kNone);
const Q8GemmKernels kAmxQ8GemmL1Prefetch =
    amx_table<AmxHwTiles, kAvx512Q8GemmL1Prefetch>("amx-int8", DecodePrefetch::kL1);
const Q8GemmKernels kAmxModelQ8GemmL1Prefetch =
    amx_table<AmxTileModel, kAvx512Q8GemmL1Prefetch>("amx-model", DecodePrefetch::kL1);

}  // namespace qt::rt
