#pragma once
// Sizes of the Hopper GEMM (frag_wgmma_gemm.cuh) that its host plan needs too (frag_family.cpp): one definition
// for the kernel, compiled by NVRTC, and the host. Plain C++ with the fixed-width integer types of the includer
// (<cstdint>, or qt_cuda_gpu.h under NVRTC).

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define QT_FRAG_WGMMA_HD __host__ __device__ __forceinline__
#else
#define QT_FRAG_WGMMA_HD inline
#endif

namespace frag_wgmma {

constexpr int kBK = 64;             // columns of K per x stage: one 128-byte swizzle row of fp16
constexpr int kStageRowBytes = 128;
constexpr int kTiles = 4;           // 64-column tiles per block: one per warp of a warpgroup
// A cluster split's partial tile in shared memory: BM rows of 256 fp32 features, each row padded by 4 floats so
// that the 4 rows one warp's accumulators write at once (rows 2t, t = 0..3) fall in different banks; float4
// reads of a row stay 16-byte aligned.
constexpr int kPartRowFloats = kTiles * 64 + 4;
constexpr int64_t kMaxSmemBytes = 227 * 1024;  // a block's opt-in dynamic shared memory on sm_90

// One 16 x 64 tile of `bits`-bit weights: 512 bytes INT4, 1,024 INT8.
QT_FRAG_WGMMA_HD constexpr int64_t weight_tile_bytes(int64_t bits) { return 16 * 64 * bits / 8; }
// The chunks of the weights' shared ring in flight while one is read: as many as x's stages ahead.
QT_FRAG_WGMMA_HD constexpr int64_t weight_chunks_in_flight(int64_t stages, int64_t kif) { return stages - kif; }

// The scales (64 fp16) and INT4 zeros (16 words) of one group of one 16 x 64 tile's column tile.
QT_FRAG_WGMMA_HD constexpr int64_t group_entry_bytes(int64_t bits) { return 64 * 2 + (bits == 4 ? 16 * 4 : 0); }

// The weights' shared-memory ring (PF = 0; none where PF tiles ride in registers): STAGES - KIF + 2 slots, each
// one 64-column chunk of K of the block's 4 column tiles, 4 k-tiles of 16 x 64 weights a tile, per weight
// matrix; with one weight matrix also an entry of group scales (and zeros) for each of the chunk's 4 k-steps
// and tiles (the fused gate/up loads its scales a group ahead in registers). Two more than the chunks in flight:
// the weights run one chunk ahead of x, and the chunk being read keeps its slot.
QT_FRAG_WGMMA_HD constexpr int64_t weight_ring_bytes(int64_t bits, int64_t stages, int64_t kif, int64_t pf, int64_t mats) {
  return pf > 0 ? 0
                : (weight_chunks_in_flight(stages, kif) + 2) * mats * kTiles * (kBK / 16) *
                      (weight_tile_bytes(bits) + (mats == 1 ? group_entry_bytes(bits) : 0));
}

// Dynamic shared memory: the x ring and the weights' ring after it (weight_ring_bytes, 0 for a register ring),
// plus the pad that puts x's first stage on a 1024-byte boundary (the 128B swizzle atom), or, where larger, a
// cluster split's partial tiles, one per weight matrix (which reuse the rings once they are drained).
QT_FRAG_WGMMA_HD constexpr int64_t smem_bytes(int64_t bm, int64_t stages, int64_t cluster, int64_t mats = 1,
                                              int64_t weight_ring = 0) {
  const int64_t ring = stages * bm * kStageRowBytes + weight_ring + 1024;
  const int64_t part = cluster > 1 ? mats * bm * kPartRowFloats * 4 : 0;
  return ring > part ? ring : part;
}

}  // namespace frag_wgmma
