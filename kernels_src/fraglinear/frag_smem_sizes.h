#pragma once
// The stage of the Ampere GEMM whose warps share the weights through shared memory (frag_smem_gemm.cuh), as
// its kernel lays it out and its host plan sizes it (frag_family.cpp): one definition for both. Plain C++ with
// the fixed-width integer types of the includer (<cstdint>, or qt_cuda_gpu.h under NVRTC).
#include "kernels_src/fraglinear/frag_wgmma_sizes.h"  // weight_tile_bytes, QT_FRAG_WGMMA_HD

namespace frag_smem {

// One stage holds one BK-column chunk of K of every operand, in this order:
//   x:      BM rows of BK halves, 16-byte chunks XOR-swizzled (frag_smem_gemm.cuh);
//   codes:  each of the block's WN column tiles, its BK / 16 k-tiles of 16 x 64 weights as the frag layout stores
//           them (a lane's words at 16 lane, so a warp reads a k-tile in 512 contiguous bytes);
//   scales: each tile's 64 fp16 scales of the chunk's group;
//   zeros:  (INT4) each tile's 16 zero words of that group.
QT_FRAG_WGMMA_HD constexpr int64_t x_bytes(int64_t bm, int64_t bk) { return bm * bk * 2; }
QT_FRAG_WGMMA_HD constexpr int64_t code_bytes(int64_t bits, int64_t wn, int64_t bk) {
  return wn * (bk / 16) * frag_wgmma::weight_tile_bytes(bits);
}
// One 64-column tile's share of a group: 64 fp16 scales, and (INT4) its 16 words of eight 4-bit zeros each.
QT_FRAG_WGMMA_HD constexpr int64_t tile_scale_bytes() { return 64 * 2; }
QT_FRAG_WGMMA_HD constexpr int64_t tile_zero_bytes(int64_t bits) { return bits == 4 ? 16 * 4 : 0; }
QT_FRAG_WGMMA_HD constexpr int64_t scale_bytes(int64_t wn) { return wn * tile_scale_bytes(); }
QT_FRAG_WGMMA_HD constexpr int64_t zero_bytes(int64_t bits, int64_t wn) { return wn * tile_zero_bytes(bits); }
QT_FRAG_WGMMA_HD constexpr int64_t stage_bytes(int64_t bits, int64_t bm, int64_t wn, int64_t bk) {
  return x_bytes(bm, bk) + code_bytes(bits, wn, bk) + scale_bytes(wn) + zero_bytes(bits, wn);
}
// The block's dynamic shared memory: the ring of `stages` stages.
QT_FRAG_WGMMA_HD constexpr int64_t smem_bytes(int64_t bits, int64_t bm, int64_t wn, int64_t bk, int64_t stages) {
  return stages * stage_bytes(bits, bm, wn, bk);
}

}  // namespace frag_smem
