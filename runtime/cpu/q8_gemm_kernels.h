#pragma once
// Q8_0 matmul as a GEMM: the weights repacked (q8_repack.h) into panels of 16 output rows in which every
// 4 consecutive columns of the 16 rows form one 64-byte vector, so a SIMD step multiplies 16 rows by 4
// columns of one token with the token's 4 int8 activations broadcast, and a tile of 16 rows x several tokens
// accumulates in registers with no horizontal sum. Each weight group's vectors are followed by the 16 rows'
// float scales for that group, so a panel, and a matrix, is one stream that decode reads front to back: with
// the scales in an array of their own, decode streamed two arrays at once, and a stand-alone loop over the
// 0.6B shape's matrices read them 3-6 % slower (1 thread, AMD EPYC). One implementation per instruction set, picked by the matmul
// kernels' Isa. Included by translation units compiled for wider ISAs: plain functions and PODs only.
#include <cstdint>

#include "kernels_src/cpu_matvec/isa_kernels.h"

namespace qt::rt {

constexpr int64_t kQ8PanelRows = 16;

// A panel, group by group: group / 4 vectors of 64 bytes (q + 128 of 4 columns x 16 rows), then 16 floats,
// the rows' scales for the group (0 for rows past the matrix). Both parts are multiples of 64 bytes for a
// group that is a multiple of 4, so every vector of a panel that starts on a cache line is aligned.
constexpr int64_t q8_group_bytes(int64_t group) { return group * kQ8PanelRows + kQ8PanelRows * 4; }
constexpr int64_t q8_panel_bytes(int64_t k, int64_t group) { return k / group * q8_group_bytes(group); }
// How far ahead of the panel being multiplied the SIMD kernels ask for a line. The panels of a matrix are one
// contiguous stream, but the hardware prefetcher stops at each 4 KB page and ramps up again; a line 2 KB ahead
// keeps the next page's lines coming. Measured on decode of the Qwen3-0.6B shape on a Cascade Lake Xeon
// (1 / 2 threads): about 21 -> 22 and 37 -> 39 tok/s; 1, 4 and 8 KB ahead did no better. Each kernel says
// which cache it asks into. Whether decode asks at all is a per-CPU choice (q8_gemm_kernels_for).
constexpr int64_t kQ8PrefetchBytes = 2048;
// Where decode (one token a panel, two on AVX2) asks for that line: into L2 (the tables' default), not at all, or
// into L1 as prefill does. Which is fastest depends on the CPU, by 5-10% of decode either way (see
// q8_gemm_kernels_for), so each table comes in all three kinds and `qbench --choose-decode` ranks them.
enum class DecodePrefetch { kL2, kNone, kL1 };
// The 16 scales of group g of the panel at w.
inline const float* q8_group_scales(const uint8_t* w, int64_t group, int64_t g) {
  return reinterpret_cast<const float*>(w + g * q8_group_bytes(group) + group * kQ8PanelRows);
}

// AWQ INT4 weights in panels of the same 16 rows (PanelFormat::kU4), so that they take the same activations, the
// same scheduling and the same float steps as Q8_0. A group is group / 8 steps of 64 bytes: byte 4 r + j of step
// s holds row r's weight at column 8 s + j in its low nibble and at 8 s + 4 + j in its high one, so the low
// nibbles of a step are the 16 rows x 4 columns of a Q8_0 step and the high nibbles the next 4 columns. Then 64
// bytes: the rows' 16 fp16 scales, their 16 zero points (0-15) as bytes, 16 bytes of padding. A weight is
// (q - zero) * scale; the nibbles go to vpdpbusd / vpmaddubsw as the unsigned operand as they are (0-15: no
// offset to take out, no saturation), and the zero point is taken out of the exact integer sum as
// zero * (the token's activation sum in the group). Half a byte a weight plus 4 bytes of scale and zero a row
// and group, where the file has 2.5: at AWQ's group of 128, 6.25% more than the weights.
enum class PanelFormat { kQ8, kU4 };
constexpr int64_t kU4StepColumns = 8;
constexpr int64_t u4_group_bytes(int64_t group) { return group / kU4StepColumns * 64 + 64; }
constexpr int64_t u4_panel_bytes(int64_t k, int64_t group) { return k / group * u4_group_bytes(group); }
constexpr int64_t panel_bytes(PanelFormat f, int64_t k, int64_t group) {
  return f == PanelFormat::kU4 ? u4_panel_bytes(k, group) : q8_panel_bytes(k, group);
}
// The 16 fp16 scales, and the 16 zero points, of group g of the U4 panel at w.
inline const uint16_t* u4_group_scales(const uint8_t* w, int64_t group, int64_t g) {
  return reinterpret_cast<const uint16_t*>(w + g * u4_group_bytes(group) + group * kQ8PanelRows / 2);
}
inline const uint8_t* u4_group_zeros(const uint8_t* w, int64_t group, int64_t g) {
  return w + g * u4_group_bytes(group) + group * kQ8PanelRows / 2 + 2 * kQ8PanelRows;
}

struct Q8GemmKernels {
  Isa isa;
  // The matrix unit `panel` hands enough tokens to (AMX tiles, or their scalar model), null for none. The
  // outputs are the same bits either way.
  const char* tiles;
  // One panel against `tokens` activation rows:
  //   y[t * y_stride + r] = sum_g w_scale[g][r] * x_scale[t*xs_stride + g] * sum_{k in g} q[r][k] * x[t][k]
  // for r < rows (<= 16). `w`: the panel's q8_panel_bytes(k, group) bytes, q + 128 as uint8 and the scales,
  // in the order above.
  // x: int8 rows (x_stride apart) in [-127, 127] with per-group scales and per-group sums x_qsum (the +128 of
  // the weights is taken out as 128 * x_qsum). group % 4 == 0, k % group == 0. The integer sums are exact and
  // the float steps are the same per output whatever `tokens` is, so a token's result does not depend on
  // how many others share its tile.
  void (*panel)(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                int64_t y_stride, int64_t rows);
  // One activation row to the panel's int8 input, per group of `group`: scale = amax / 127, q =
  // clamp(round-half-even(x / scale), -127, 127), qsum = sum of q. The same numbers as quantize_rows()
  // (kernels_src/cpu_matvec/quantized_matvec.h), which defines them.
  void (*quantize_row)(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum);
  // `count` consecutive panels of one matrix (q8_panel_bytes(k, group) apart, panel i's outputs at y + 16 i,
  // `rows` the matrix's rows from the first panel's first row on) against the same `tokens` rows, as `panel` on
  // each. For a kernel that prepares the activations in a form of its own, once a run instead of once a panel;
  // null where `panel` needs none. run_panels() picks.
  void (*panels)(const uint8_t* w, int64_t count, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                 const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                 int64_t y_stride, int64_t rows) = nullptr;
  // Where decode asks for the line kQ8PrefetchBytes ahead (DecodePrefetch).
  DecodePrefetch decode_prefetch = DecodePrefetch::kL2;
  // `panel` for a U4 panel (u4_panel_bytes(k, group) bytes, group % 8 == 0):
  //   y[t * y_stride + r] = sum_g scale[g][r] * x_scale[t][g] * (sum_{k in g} q[r][k] * x[t][k] - zero[g][r] * x_qsum[t][g])
  // with the integer part exact, and the same float steps as `panel`'s. The tile tables run their ISA's vector
  // kernel here (the tiles take int8 weights).
  void (*panel_u4)(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                   const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                   int64_t y_stride, int64_t rows) = nullptr;
};

// `count` consecutive panels (see Q8GemmKernels::panels) on `kernels`, by its `panels` where it has one.
void run_panels(const Q8GemmKernels& kernels, const uint8_t* w, int64_t count, int64_t k, int64_t group,
                const int8_t* x, int64_t x_stride, const float* x_scale, const int32_t* x_qsum, int64_t xs_stride,
                int64_t tokens, float* y, int64_t y_stride, int64_t rows);
// The same for panels of either format.
void run_panels(const Q8GemmKernels& kernels, PanelFormat format, const uint8_t* w, int64_t count, int64_t k,
                int64_t group, const int8_t* x, int64_t x_stride, const float* x_scale, const int32_t* x_qsum,
                int64_t xs_stride, int64_t tokens, float* y, int64_t y_stride, int64_t rows);

// The matrix unit that multiplies enough tokens at once: none (the SIMD kernels of the ISA), AMX-INT8 tiles, or
// the AMX kernel through the scalar model of the tile instructions (slow; for checking the AMX code anywhere).
enum class TileUnit { kNone, kAmx, kAmxModel };

const char* tile_unit_name(TileUnit unit);
// Throws qt::Error for a tile unit without kernels for `isa` (the AMX kernel needs AVX-512 VNNI).
// `decode_prefetch`: the table whose decode asks for the line kQ8PrefetchBytes ahead, or the one that leaves the
// stream to the hardware prefetcher. Neither wins everywhere. Decode of the 0.6B shape, AVX2, 1 thread: the
// prefetch took a Zen 1 EPYC from 14.4 to 17.3-18.9 tok/s and a Cascade Lake Xeon from 21 to 22, and cost a Zen 3
// EPYC about 9% (12.6 against 13.9 tok/s; 2 threads 22.8 against 24.8; the 30B-A3B shape 18.5 against 19.9, means
// of 3 alternated runs). So it is a per-CPU choice: `qbench --choose-decode` on the CPU ranks both on the model and
// keeps the ranking in the tuning store, which qrun and qbench given that store (--tuned-cache) follow. The integer
// sums, and so the outputs, are the same bits either way. Into L1 instead of L2 took an Intel Xeon (Ice Lake) from
// 30.4 to 31.7 tok/s at 2 threads and 14.6 to 15.4 at 1 (0.6B shape, medians of 5 alternated runs), where no
// prefetch was 3% faster than into L2: a stand-alone loop over 1024-wide panels streamed at 98% of the read loop
// with it, 91-93% into L2.
const Q8GemmKernels& q8_gemm_kernels_for(Isa isa, TileUnit tiles = TileUnit::kNone,
                                         DecodePrefetch decode_prefetch = DecodePrefetch::kL2);

// The portable quantizer, also used by the SIMD tables for groups their vectors do not fit.
void quantize_row_scalar(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum);
// The AVX2 one (needs AVX2), also the AVX-VNNI table's.
void quantize_row_avx2(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum);

extern const Q8GemmKernels kScalarQ8Gemm;
extern const Q8GemmKernels kAvx2Q8Gemm;
extern const Q8GemmKernels kAvxVnniQ8Gemm;
extern const Q8GemmKernels kAvx512Q8Gemm;
// AVX-512 VNNI with AMX-INT8 tiles for 8 tokens or more (q8_gemm_kernels_amx.cpp): kAmxQ8Gemm runs the tile
// instructions and must only run where amx_support() (amx_support.h) says they are usable; kAmxModelQ8Gemm
// runs the same kernel through the scalar model of the instructions (amx_tile_model.h), on any CPU with
// AVX-512 VNNI.
extern const Q8GemmKernels kAmxQ8Gemm;
extern const Q8GemmKernels kAmxModelQ8Gemm;
// The same tables without decode prefetch, and with it into L1 (q8_gemm_kernels_for).
extern const Q8GemmKernels kAvx2Q8GemmNoPrefetch;
extern const Q8GemmKernels kAvxVnniQ8GemmNoPrefetch;
extern const Q8GemmKernels kAvx512Q8GemmNoPrefetch;
extern const Q8GemmKernels kAmxQ8GemmNoPrefetch;
extern const Q8GemmKernels kAmxModelQ8GemmNoPrefetch;
extern const Q8GemmKernels kAvx2Q8GemmL1Prefetch;
extern const Q8GemmKernels kAvxVnniQ8GemmL1Prefetch;
extern const Q8GemmKernels kAvx512Q8GemmL1Prefetch;
extern const Q8GemmKernels kAmxQ8GemmL1Prefetch;
extern const Q8GemmKernels kAmxModelQ8GemmL1Prefetch;

}  // namespace qt::rt
