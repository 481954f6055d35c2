#pragma once
// The stream GEMV's shared memory (frag_stream_gemv.cuh), as its kernel lays it out and its host plans size it
// (frag_family.cpp, moe_stream): one definition for both. Plain C++ with the fixed-width integer types of the
// includer (<cstdint>, or qt_cuda_gpu.h under NVRTC).
#include "kernels_src/fraglinear/frag_wgmma_sizes.h"  // QT_FRAG_WGMMA_HD

namespace frag_stream_sizes {

// The 16-byte pieces a lane takes of one 16 x 64 weight tile: 512 bytes a tile for INT4, 1,024 for 8-bit.
QT_FRAG_WGMMA_HD constexpr int64_t tile_pieces(int64_t bits) { return bits == 4 ? 1 : 2; }
// One slot of the shared ring (RING = 1), a lane's 16-byte pieces: each of the tn column tiles' B pieces, the A
// fragment and, under the fused norm, its norm weights.
QT_FRAG_WGMMA_HD constexpr int64_t slot_pieces(int64_t bits, int64_t tn, bool norm) {
  return tn * tile_pieces(bits) + 1 + (norm ? 1 : 0);
}
QT_FRAG_WGMMA_HD constexpr int64_t ring_bytes(int64_t bits, int64_t pf, int64_t tn, bool norm, int64_t threads) {
  return pf * slot_pieces(bits, tn, norm) * threads * 16;
}
// The warps' partial sums meeting in warp 0 at the end: warps 1.. (one slot at one warp), each 8 tn C fragments
// of 4 floats a lane.
QT_FRAG_WGMMA_HD constexpr int64_t partial_sum_bytes(int64_t kw, int64_t tn) {
  return (kw > 1 ? kw - 1 : 1) * (8 * tn * 4) * 32 * 4;
}
// A shared-ring kernel's dynamic shared memory: the ring, which the partial sums reuse once every lane's copies
// into it have landed (the register ring's kernel keeps them in static shared memory).
QT_FRAG_WGMMA_HD constexpr int64_t ring_smem_bytes(int64_t bits, int64_t pf, int64_t tn, bool norm, int64_t kw) {
  return ring_bytes(bits, pf, tn, norm, 32 * kw) > partial_sum_bytes(kw, tn) ? ring_bytes(bits, pf, tn, norm, 32 * kw)
                                                                              : partial_sum_bytes(kw, tn);
}

}  // namespace frag_stream_sizes
