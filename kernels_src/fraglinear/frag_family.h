#pragma once
// Families on the frag layout (frag_layout.h), for AWQ INT4, INT8 group-wise (INT8_GW_SYM) and Q8_0 weights,
// one of each kind per type (prefix awq_, int8gw_, q8_0_; Q8_0 is stored as the 8-bit layout):
//   awq_frag_repack, int8gw_frag_repack,  op "repack": the load-time repack on the device (frag_repack.cuh),
//   q8_0_frag_repack                      bit-exact with the CPU reference repack_awq / repack_int8 / repack_q8_0
//   awq_frag_dequant,                     op "dequant.frag": frag layout -> fp16 W[K][N] (frag_dequant.cuh), the
//   int8gw_frag_dequant,                  first step of the dequant + cuBLASLt contender of the dispatch
//   q8_0_frag_dequant
//   awq_frag_gemv, int8gw_frag_gemv       op "linear.frag", M <= 16: one m16 tile, scales folded per group
//   awq_frag_gemm, int8gw_frag_gemm       op "linear.frag", any M: 32 or 64 rows per block, fp16 weights
//   awq_frag_stream_gemv,                 op "linear.frag", M <= 16: the GEMV scheduled for bytes in flight
//   int8gw_frag_stream_gemv               (frag_stream_gemv.cuh): warps split K, no barrier in the loop
//   awq_frag_gate_up_swiglu, ...          op "gate_up_swiglu.frag", M <= 16: the streaming GEMV over [gate | up]
//                                         with SwiGLU in its epilogue (frag_stream_gemv.cuh, SWIGLU = 1)
//   awq_frag_norm_gemv, ...               op "rmsnorm_linear.frag": the stream GEMV on RMSNorm(x), each block its
//                                         rows' statistics (a decode step's q|k|v without the norm launch)
//   awq_frag_norm_gate_up_swiglu, ...     op "rmsnorm_gate_up_swiglu.frag": the same before gate|up + SwiGLU
//   awq_frag_residual_gemv, ...           op "linear_residual.frag": the stream GEMV adding its output to y in
//                                         place (o_proj and down_proj with the residual add)
//   awq_frag_residual_norm_gemv, ...      op "linear_residual_rmsnorm.frag": the same, its last blocks writing the
//                                         rows' RMSNorm (o_proj before a MoE block)
//   awq_frag_wgmma_gemm,                  op "linear.frag", any M, sm_90a: wgmma with the weights as its
//   int8gw_frag_wgmma_gemm                register A operand (frag_wgmma_gemm.cuh)
//   awq_frag_smem_gemm, ...               op "linear.frag", any M, sm_80+: mma.sync in blocks of wm x wn warps
//                                         sharing the weights through a cp.async ring (frag_smem_gemm.cuh)
// Both linear kinds read B fragments straight from global memory (frag_linear.cuh) and reduce split-K
// partials in the same launch. The runtime binds the repacked arrays as "bq", "bs", "bz".
#include "kernels_src/registry/family.h"
#include <functional>
#include <string>
#include <vector>

namespace qt::kernels::frag {

struct FragDims;  // frag_layout.h

// The fused streaming GEMVs' ops, as the runtime and the static step model name them.
inline constexpr const char* kNormLinearOp = "rmsnorm_linear.frag";
inline constexpr const char* kNormGateUpOp = "rmsnorm_gate_up_swiglu.frag";
inline constexpr const char* kResidualOp = "linear_residual.frag";
inline constexpr const char* kResidualNormOp = "linear_residual_rmsnorm.frag";

// frag_stream_gemv.cuh's FUSE and ROUTE template values, and the name expression of one of its kernels (the
// arguments its template defaults give left out).
enum class StreamFuse { kNone = 0, kNorm = 1, kResidual = 2, kResidualNorm = 3 };
enum class StreamRoute { kNone = 0, kRows = 1, kCombine = 2 };
std::string stream_gemv_kernel(int bits, int64_t kw, int64_t pf, int64_t tn, bool swiglu,
                               StreamFuse fuse = StreamFuse::kNone, StreamRoute route = StreamRoute::kNone,
                               int64_t epl = 1, int64_t ring = 0);
// A stream GEMV point's ring: 0 in registers, 1 in shared memory (a point stored before the parameter: 0). The
// shared ring's dynamic shared memory: pf slots of (tn tiles' 16-byte pieces, the A fragment, and under the fused
// norm its weights) for each thread of the block, at least the warps' partial sums that reuse it
// (frag_stream_sizes.h); 0 for the register ring.
int64_t stream_ring(const Point& p);
// Whether a family is one of the stream GEMVs (its space has the ring): the runtime prefers them to the frag
// GEMVs at M <= 16 (registry order).
bool is_stream_family(const KernelFamily& f);
// A stream GEMV point against groups of `group` rows: the register ring unrolls pf steps a trip within a group, so
// pf must divide its 16-row steps; the shared ring runs across the groups. Empty where the point takes them.
std::string stream_group_check(const Point& p, int64_t group);
// The kernel's RING template value for a point at groups of `group` rows: 0 the register ring; the shared ring 1
// where pf divides the group's steps (its loop unrolls pf steps a trip), else 2 (a step a trip, across groups).
int64_t stream_ring_kernel(const Point& p, int64_t group);
// A stream family's kernel list: `name(ring)` for each RING value its plans may pick (the shared ring's two
// loops are compiled together).
std::vector<std::string> stream_ring_kernel_names(const Point& p, const std::function<std::string(int64_t)>& name);
int64_t stream_ring_smem(int bits, const Point& p, int64_t tn, bool norm);

// The Hopper GEMMs' main loop parameter both spaces share (frag_wgmma_gemm.cuh's KIF): k-steps of wgmmas in
// flight.
Param wgmma_in_flight_param();
// And the weights' ring (PF): tiles in registers, or 0 for whole chunks through shared memory.
Param wgmma_weight_ring_param();
// The weight bytes one warp keeps in flight at point p (`mats` weight matrices of `bits`-bit codes), for the
// static model's Little's-law term.
int64_t wgmma_weight_bytes_in_flight(const Point& p, int bits, int64_t mats);
// A Hopper GEMM block's chain of waits over `chunks` 64-column chunks of K: the register ring (pf > 0) waits out
// one DRAM round trip every k-step of 16 (see wgmma_weight_ring_param); the shared ring none.
LatencyChain wgmma_weight_ring_chain(const Point& p, int64_t chunks);
// A Hopper GEMM block's dynamic shared memory (frag_wgmma_sizes.h): x's ring, the weights' where pf = 0, or
// a cluster split's partial tiles.
int64_t wgmma_smem_bytes(const Point& p, int bits, int64_t mats);
// The Hopper GEMMs' K split and rings (frag_wgmma_gemm.cuh and the grouped moe_wgmma.cuh), "" when fine: a
// cluster split is the point's only split (no `split`, nor stream-K where the space has `sk`), the rings or
// its partial tiles, one per weight matrix (`mats`), fit the shared memory a block may have, and x's ring
// keeps a stage ahead of the k-steps in flight.
std::string wgmma_split_check(const Point& p, int bits, int64_t mats);
// Neither split exceeds the 64-column chunks of K, and the groups are a multiple of 32 columns.
std::string wgmma_split_check(const Point& p, const FragDims& d);

const KernelFamily& awq_repack_family();
const KernelFamily& int8_repack_family();
const KernelFamily& awq_dequant_family();
const KernelFamily& int8_dequant_family();
const KernelFamily& q8_0_dequant_family();
const KernelFamily& awq_gemv_family();
const KernelFamily& awq_gemm_family();
const KernelFamily& int8_gemv_family();
const KernelFamily& int8_gemm_family();
const KernelFamily& awq_stream_gemv_family();
const KernelFamily& int8_stream_gemv_family();
const KernelFamily& awq_gate_up_family();
const KernelFamily& int8_gate_up_family();
const KernelFamily& q8_0_gate_up_family();
const KernelFamily& awq_norm_gemv_family();
const KernelFamily& int8_norm_gemv_family();
const KernelFamily& q8_0_norm_gemv_family();
const KernelFamily& awq_residual_gemv_family();
const KernelFamily& int8_residual_gemv_family();
const KernelFamily& q8_0_residual_gemv_family();
// The residual GEMVs that also write the RMSNorm of the rows they finish (op linear_residual_rmsnorm.frag): o_proj
// before a MoE block, for AWQ INT4, INT8 group-wise and Q8_0.
const std::vector<const KernelFamily*>& residual_norm_gemv_families();
const KernelFamily& awq_norm_gate_up_family();
const KernelFamily& int8_norm_gate_up_family();
const KernelFamily& q8_0_norm_gate_up_family();
const KernelFamily& awq_wgmma_gemm_family();
const KernelFamily& int8_wgmma_gemm_family();
const KernelFamily& q8_0_repack_family();
const KernelFamily& q8_0_gemv_family();
const KernelFamily& q8_0_gemm_family();
const KernelFamily& q8_0_stream_gemv_family();
const KernelFamily& q8_0_wgmma_gemm_family();
const KernelFamily& awq_smem_gemm_family();
const KernelFamily& int8_smem_gemm_family();
const KernelFamily& q8_0_smem_gemm_family();
// The repack family of a type the frag layout holds (frag_layout_holds); qt::Error for any other.
const KernelFamily& repack_family(WeightType t);

// Dynamic shared memory of a linear point (the A ring), bytes.
int64_t linear_smem_bytes(const Point& p);

}  // namespace qt::kernels::frag
