#pragma once
// The frag layout's constants and index maps (frag_layout.h describes the layout and why), written once and
// included by everything that writes or reads it by index: the CPU reference repack (frag_layout.cpp), the
// device repack (frag_repack.cuh) and the device dequant (frag_dequant.cuh). The linear kernels read whole
// 16-byte runs in this order (frag_linear.cuh, frag_wgmma_gemm.cuh). Plain C++ that the host compiler, the
// emulator's and NVRTC all take: under NVRTC the functions are host and device functions.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FRAG_MAP_FN __host__ __device__ __forceinline__ constexpr
#else
#define FRAG_MAP_FN inline constexpr
#endif

namespace frag_map {

constexpr int kTileK = 16, kTileN = 64;  // a tile: 16 rows of K by 64 columns of N, eight 8-column fragments
// Zero tiles after the last weight tile: the linear kernels' B rings (at most kPadTiles tiles ahead) load
// without a predicate and may read that far past a block's range.
constexpr int kPadTiles = 4;
constexpr int kScalesPerRun = 64;    // fp16 scales per (column tile, group)
constexpr int kZeroWordsPerRun = 16;  // INT4 zero words per (column tile, group)

FRAG_MAP_FN int tile_words(int bits) { return bits == 4 ? 128 : 256; }

// The size of each array of one N x K matrix in groups of G along K: weight words (with the pad tiles),
// scale halves, and INT4 zero words (none for 8 bits). FragDims states the same on the host.
FRAG_MAP_FN long long column_tiles(long long n) { return (n + kTileN - 1) / kTileN; }
FRAG_MAP_FN long long weight_words(int bits, long long n, long long k) {
  return (column_tiles(n) * (k / kTileK) + kPadTiles) * tile_words(bits);
}
FRAG_MAP_FN long long scale_halves(long long n, long long k, long long g) { return column_tiles(n) * (k / g) * kScalesPerRun; }
FRAG_MAP_FN long long zero_words(int bits, long long n, long long k, long long g) {
  return bits == 4 ? column_tiles(n) * (k / g) * kZeroWordsPerRun : 0;
}

// Lane 4g + t holds, of fragment f, column 8f + g at the rows of element e = 0..3: 2t, 2t+1, 2t+8, 2t+9.
FRAG_MAP_FN int frag_col(int f, int g) { return 8 * f + g; }
FRAG_MAP_FN int frag_row(int t, int e) { return 2 * t + (e & 1) + 8 * (e >> 1); }

// The word of a tile that holds lane `lane`'s part of fragment f: INT4 word f / 2 of the lane's four (fragments
// 2w and 2w + 1 share word w); INT8 half f / 4 (128 words each), word f % 4 of the lane's four in it.
FRAG_MAP_FN int tile_word(int bits, int lane, int f) {
  return bits == 4 ? 4 * lane + f / 2 : 128 * (f / 4) + 4 * lane + f % 4;
}
// The inverse: the lane, and the first fragment, of word `word` of a tile (an INT4 word holds that one and the
// next).
FRAG_MAP_FN int word_lane(int bits, int word) { return bits == 4 ? word / 4 : (word % 128) / 4; }
FRAG_MAP_FN int word_fragment(int bits, int word) { return bits == 4 ? 2 * (word % 4) : 4 * (word / 128) + word % 4; }
// The bit position of element e of fragment f in its word: INT4 nibble {0, 4, 1, 5}[e], + 2 for the odd
// fragment of the pair (the order the LOP3 unpack yields fragment registers in); INT8 byte e.
FRAG_MAP_FN int element_shift(int bits, int f, int e) {
  return bits == 4 ? 4 * ((e >> 1) + 4 * (e & 1) + 2 * (f & 1)) : 8 * e;
}

// Scales: position p of a (column tile, group) run holds column 8 (4 r + i) + 2 t + j of the tile, for
// p = 32 r + 8 t + 2 i + j, so lane t's two 16-byte runs hold the two output columns of its mma C fragments.
FRAG_MAP_FN int scale_col(int p) { return 8 * (4 * (p / 32) + (p % 8) / 2) + 2 * ((p % 32) / 8) + p % 2; }
FRAG_MAP_FN int scale_pos(int col) { return 32 * (col / 32) + 8 * ((col % 8) / 2) + 2 * ((col / 8) % 4) + col % 2; }

// INT4 zeros: word 2 g + h of a run holds the zero of column 8 (4 h + i) + g of the tile at nibbles i and i + 4
// for i = 0..3, each duplicated in the word's two halves.
FRAG_MAP_FN int zero_word(int g, int h) { return 2 * g + h; }
FRAG_MAP_FN int zero_col(int g, int h, int i) { return 8 * (4 * h + i) + g; }

}  // namespace frag_map
