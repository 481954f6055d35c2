#pragma once
// The CPU definitions of Qwen3-MoE's device-side steps, each the plain statement every kernel of
// kernels_src/moe is verified against, and what the CPU backend itself runs:
//   gating        softmax (fp32) over all experts, top-k (ties: lower expert index first), optional renorm;
//   init routing  MoeInitRoutingV3: (expert, row) pairs sorted by expert, the scatter index, token counts,
//                 an active expert range, and the gathered (optionally int8-quantized) expanded rows;
//   align         vLLM's moe_align_block_size: each expert's rows padded to a block, a block -> expert map;
//   grouped GEMM  y[i] = a(i) W_{expert(i)}^T for every routed row i = t*k + j, with SwiGLU when fused;
//   finalize      out[t] = sum_j w[t][j] * y[row(t*k+j)];
// and TensorRT-LLM's preprocessed INT8 weight layout, made once at load time.
#include <cstdint>
#include <vector>

#include "models/core/weights.h"

namespace qt::kernels::moe {

// For each of m rows of `logits` [m][experts]: ids/weights [m][top_k] in descending probability (ties: lower
// expert index first, as torch.topk returns them); weights renormalized to sum 1 when `renormalize`.
void gating(const float* logits, int64_t m, int64_t experts, int64_t top_k, bool renormalize, int32_t* ids,
            float* weights);

enum class TokenCounts { Count, KeyValue };

// MoeInitRoutingV3's index outputs for the routed rows i = t*top_k + j of `ids` [rows][top_k]. Only rows
// whose expert lies in [start, end) are active; they are sorted by expert (stable: by i within an expert).
struct InitRouting {
  int64_t active = 0;                     // rows with an expert in [start, end)
  std::vector<int32_t> sorted_row;        // [rows*top_k]: position p -> routed row i; -1 from `active` on
  std::vector<int32_t> expanded_row_idx;  // [rows*top_k]: expanded_row_idx[sorted_row[p]] = p; -1 if inactive
  // Count: [end - start] tokens per expert of the range. KeyValue: (expert, count) pairs for the experts of
  // the range that got any, [pairs][2] with `pairs` = expert_tokens.size() / 2.
  std::vector<int64_t> expert_tokens;
};
InitRouting init_routing(const int32_t* ids, int64_t rows, int64_t top_k, int64_t experts, int64_t start, int64_t end,
                         TokenCounts mode);
// expanded[p] = x[sorted_row[p] / top_k] for p < active ([active][h]).
void expand_rows(const InitRouting& r, int64_t top_k, const float* x, int64_t h, float* expanded);
// The same rows quantized per row: scale = max|row| / 127 and q = round(x / scale), halves away from zero
// (scale 0 and q 0 for an all-zero row).
void expand_rows_int8(const InitRouting& r, int64_t top_k, const float* x, int64_t h, int8_t* q, float* scale);

// moe_align_block_size for `count` routed rows over `experts` experts and blocks of `block` rows.
struct Alignment {
  int64_t padded = 0;                 // sum over experts of count_e rounded up to the block
  std::vector<int32_t> sorted_ids;    // [capacity]: slot -> routed row, `count` as the padding sentinel
  std::vector<int32_t> block_expert;  // [capacity / block]: the expert of each block, -1 past `padded`
};
// Rows a caller must provision: every expert with a row wastes at most block-1 slots.
int64_t align_capacity(int64_t count, int64_t experts, int64_t block);
Alignment align_blocks(const int32_t* ids, int64_t count, int64_t experts, int64_t block);

// The grouped expert GEMM's exact result for routed row i, in double, with sum |a*w| (which bounds any fp32
// accumulation's error): y[n] = sum_k a[k] * W_e[n][k].
void expert_row(const QTensor& w, const uint16_t* a_f16, int64_t n_cols, double* y, double* y_abs);

// out[t][c] = sum_j weights[t][j] * y[rows[t*top_k + j]][c], accumulated in j order.
void finalize(const float* y, const int32_t* rows, const float* weights, int64_t m, int64_t top_k, int64_t h,
              float* out);

// TensorRT-LLM's fpA_intB layout of one expert's INT8 weights for sm80-89 (and Hopper MoE, which forces it):
// from our [K][N] uint8 (q = w + 128) to the interleaved column-major bytes the CUTLASS kernels load.
// K % 64 == 0 and N % 32 == 0 (throws qt::Error otherwise).
std::vector<uint8_t> trtllm_int8_layout(const uint8_t* q, int64_t k, int64_t n);
// The byte offset in that layout of weight (k, n), the inverse the kernels use.
int64_t trtllm_int8_offset(int64_t k_index, int64_t n_index, int64_t k);

}  // namespace qt::kernels::moe
