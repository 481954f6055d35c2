#pragma once
// The bandwidth ladder: a DRAM read stream at a stated number of bytes in flight per warp, by each of the ways our
// kernels load weights, so a GPU run measures Little's law for each of them rather than the static model assuming it.
//   LOAD = 0: 16-byte register loads (ld.global.nc, L1 no-allocate, L2 evict-first), DEPTH a lane in a register
//             ring: the decode GEMVs' weight loads (frag::load_tile), which reached 14-34% of an H200's bandwidth;
//   LOAD = 1: 16-byte cp.async.cg copies into a shared ring of DEPTH stages a warp, each lane copying and reading
//             its own 16 bytes: the GEMMs' loads, no register held while in flight;
//   LOAD = 2 (sm_90): the TMA engine's 1-D bulk copies, one stage of TILES 512-byte tiles each, DEPTH stages a warp
//             in flight, each on an mbarrier of its own that lane 0 arms and a second that its lanes release.
// A block streams one contiguous share of the 512-byte tiles, its warps each a contiguous part of it (as a stream
// GEMV's warps split a column tile's K), and every word read is XORed into one word per block (out[block], halves XORed to 16 bits), so no
// load is dead and the result shows every byte arrived. In flight per SM: resident warps x DEPTH x TILES x 512 bytes.
#include "kernels_src/common/qt_cuda.h"

template <int LOAD, int WARPS, int DEPTH, int TILES = 1>
__global__ void __launch_bounds__(WARPS * 32)
    mem_read_kernel(const uint4* __restrict__ src, int64_t tiles, uint32_t* __restrict__ out) {
  qt::grid_dependency_entry();
  static_assert(LOAD >= 0 && LOAD <= 2, "LOAD: register loads, cp.async or bulk copies");
  static_assert(LOAD == 2 || TILES == 1, "only a bulk copy spans several tiles");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto at_most = [](int64_t a, int64_t b) { return a < b ? a : b; };
  const int64_t per_block = (tiles + gridDim.x - 1) / gridDim.x;
  const int64_t b_first = at_most(tiles, (int64_t)blockIdx.x * per_block), b_last = at_most(tiles, b_first + per_block);
  const int64_t per_warp = (b_last - b_first + WARPS - 1) / WARPS;
  const int64_t first = at_most(b_last, b_first + warp * per_warp), count = at_most(b_last, first + per_warp) - first;
  const uint4* tile0 = src + first * 32;  // a tile is 32 lanes x 16 bytes
  uint32_t acc = 0;
  auto fold = [&](const uint4& v) { acc ^= v.x ^ v.y ^ v.z ^ v.w; };

  if constexpr (LOAD == 0) {
    const uint64_t policy = qt::policy_evict_first();
    uint4 ring[DEPTH];
#pragma unroll
    for (int p = 0; p < DEPTH; ++p)
      if (p < count) ring[p] = qt::ldg_stream_u4(tile0 + p * 32 + lane, policy);
    for (int64_t s = 0; s < count; s += DEPTH) {
#pragma unroll
      for (int p = 0; p < DEPTH; ++p) {
        if (s + p < count) {
          fold(ring[p]);
          if (s + p + DEPTH < count) ring[p] = qt::ldg_stream_u4(tile0 + (s + p + DEPTH) * 32 + lane, policy);
        }
      }
    }
  } else if constexpr (LOAD == 1) {
    QT_SHARED_ALIGNED(ring, 16, uint4[WARPS][DEPTH][32]);
    // One commit group a stage, empty ones past the range too, so that wait_group<DEPTH - 1> is always stage s.
#pragma unroll
    for (int p = 0; p < DEPTH; ++p) {
      if (p < count) qt::cp_async_cg16(qt::smem_u32(&ring[warp][p][lane]), tile0 + p * 32 + lane);
      qt::cp_async_commit();
    }
    for (int64_t s = 0; s < count; ++s) {
      qt::cp_async_wait<DEPTH - 1>();
      const int slot = int(s % DEPTH);
      const uint4 v = ring[warp][slot][lane];  // this lane's own copy: no other thread reads or writes it
      fold(v);
      if (s + DEPTH < count) qt::cp_async_cg16(qt::smem_u32(&ring[warp][slot][lane]), tile0 + (s + DEPTH) * 32 + lane);
      qt::cp_async_commit();
    }
    qt::cp_async_wait_all();
  } else {
    // Stage s holds the warp's tiles TILES s.. (the last one short where the range ends).
    constexpr int STAGE = TILES * 32;  // uint4 a stage
    QT_SHARED_ALIGNED(ring, 128, uint4[WARPS][DEPTH][STAGE]);
    QT_SHARED_ALIGNED(full, 8, uint64_t[WARPS][DEPTH]);   // a stage's bytes arrived
    QT_SHARED_ALIGNED(empty, 8, uint64_t[WARPS][DEPTH]);  // the warp's lanes read the stage
    const int64_t stages = (count + TILES - 1) / TILES;
    if (lane == 0) {
      for (int p = 0; p < DEPTH; ++p) {
        qt::mbarrier_init(qt::smem_u32(&full[warp][p]), 1);
        qt::mbarrier_init(qt::smem_u32(&empty[warp][p]), 32);
      }
      qt::fence_mbarrier_init();
    }
    __syncwarp();
    auto stage_tiles = [&](int64_t s) { return int(at_most(TILES, count - s * TILES)); };
    auto issue = [&](int64_t s) {
      const int slot = int(s % DEPTH);
      const uint32_t bytes = uint32_t(stage_tiles(s)) * 512;
      if (s >= DEPTH) qt::mbarrier_wait_parity(qt::smem_u32(&empty[warp][slot]), uint32_t((s / DEPTH - 1) & 1));
      qt::mbarrier_arrive_expect_tx(qt::smem_u32(&full[warp][slot]), bytes);
      qt::cp_async_bulk_g2s(qt::smem_u32(&ring[warp][slot][0]), tile0 + s * STAGE, bytes, qt::smem_u32(&full[warp][slot]));
    };
    if (lane == 0)
      for (int p = 0; p < DEPTH && p < stages; ++p) issue(p);
    for (int64_t s = 0; s < stages; ++s) {
      const int slot = int(s % DEPTH);
      qt::mbarrier_wait_parity(qt::smem_u32(&full[warp][slot]), uint32_t((s / DEPTH) & 1));
      const int n = stage_tiles(s);
      for (int t = 0; t < n; ++t) {
        const uint4 v = ring[warp][slot][t * 32 + lane];
        fold(v);
      }
      qt::mbarrier_arrive(qt::smem_u32(&empty[warp][slot]));  // releases the stage for the copy DEPTH stages on
      __syncwarp();  // every lane has arrived, so lane 0's wait on the release does not spin
      if (lane == 0 && s + DEPTH < stages) issue(s + DEPTH);
    }
  }

  // The block's word: each warp's lanes, then the warps in order.
#pragma unroll
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  QT_SHARED(part, uint32_t[WARPS]);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t x = 0;
    for (int w = 0; w < WARPS; ++w) x ^= part[w];
    out[blockIdx.x] = (x ^ (x >> 16)) & 0xffffu;  // 16 bits: exact as the float a check compares
  }
}
