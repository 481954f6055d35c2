#pragma once
// The main loop the shared-memory tensor-core GEMMs share (awq_gemm, q8_0_gemm, f16_gemm, and the grouped MoE
// GEMM's f16 tile): a block's range of K tiles when the grid splits K, and the cp.async pipeline over it.
// Each GEMM brings its own stage loader (what one K tile's copies are, for its weight type) and its own compute
// step (dequantize and/or mma on a landed stage); the order of copies, commits, waits and barriers is here once.
#include "kernels_src/common/qt_cuda.h"

// K tiles [begin, begin + count) of the blockIdx.z-th of gridDim.z equal shares of `tiles` (the last ones may be
// short or empty).
struct KTileRange {
  int begin, count;
};
__device__ __forceinline__ KTileRange split_k_range(int tiles) {
  const int per_split = (tiles + (int)gridDim.z - 1) / (int)gridDim.z;
  const int begin = min(tiles, (int)blockIdx.z * per_split);
  return {begin, min(tiles, begin + per_split) - begin};
}

template <int MF, int NF>
__device__ __forceinline__ void zero_accumulators(float (&acc)[MF][NF][4]) {
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int nf = 0; nf < NF; ++nf)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mf][nf][i] = 0.0f;
}

// Tiles 0 .. count-1 through STAGES stage buffers: load(slot, t) issues tile t's copies into stage `slot`,
// compute(slot, t) consumes a landed stage. Tiles t+1 .. t+STAGES-1 are in flight while tile t computes. Every
// iteration commits exactly one group (possibly empty), so wait_group<STAGES-2> always means "tile t has
// landed"; the barrier after it publishes tile t to every thread and retires the stage the next load refills
// (computed in the previous iteration). A compute step that stages through shared memory of its own (a
// dequantized tile) brings its own barrier between writing and reading it.
template <int STAGES, class Load, class Compute>
__device__ __forceinline__ void cp_async_pipeline(int count, Load load, Compute compute) {
  static_assert(STAGES >= 2, "the pipeline needs two stages");
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < count) load(s, s);
    qt::cp_async_commit();
  }
  for (int t = 0; t < count; ++t) {
    qt::cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = t + STAGES - 1;
    if (next < count) load(next % STAGES, next);
    qt::cp_async_commit();
    compute(t % STAGES, t);
  }
  qt::cp_async_wait<0>();
}
