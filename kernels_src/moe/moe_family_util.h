#pragma once
// What the MoE family descriptions share: the launch of moe_place_kernel (init routing, align and every
// grouped plan start with it) and test expert ids that exercise the routing rules.
#include <cstdint>
#include <string>
#include <vector>

#include "common/rng.h"
#include "kernels_src/registry/family.h"

namespace qt::kernels::moe {

// The name expression of moe_place_kernel<warps>.
std::string place_kernel(int64_t warps);

// Buffers moe_place_kernel writes; an empty name passes a null pointer (that output is not produced).
struct PlaceBuffers {
  std::string sorted, position, counts, pairs, pairs_used, block_expert, total;
};
// moe_place_kernel<warps> over the routed rows of buffer "ids": experts [start, end) of `experts`, each padded
// to `block` slots, `cap` slots in all, `sentinel` in the unused ones.
Launch place_launch(int64_t warps, const PlaceBuffers& b, int64_t count, int64_t experts, int64_t start, int64_t end,
                    int64_t block, int64_t cap, int64_t sentinel);

// Expert ids [rows][k] by `pattern`:
//   0 skewed: low experts popular, expert E-1 never chosen when E > k (an expert with zero rows), distinct
//     within a token (as gating gives them);
//   1 every row to expert 0 (one expert takes everything);
//   2 uniform, repeats allowed.
std::vector<int32_t> routed_ids(int64_t rows, int64_t k, int64_t experts, int pattern, Rng& rng);

// The experts `tokens` reach with `topk` distinct picks each from `experts`, in expectation when the picks are
// uniform (the balanced load a trained router is pushed toward): E (1 - (1 - k / E)^T).
double expected_experts(int64_t tokens, int64_t experts, int64_t topk);

// The blocks of `bm` routed rows the same picks make over all experts, in expectation: E x E[ceil(n / bm)]
// with n ~ Binomial(tokens, topk / E), an expert's rows when each is grouped and padded to whole blocks.
double expected_row_blocks(int64_t tokens, int64_t experts, int64_t topk, int64_t bm);

// A grouped expert GEMM's default points in the order its untuned rule prefers them for shape dims T, E, TOPK
// (as vLLM's): `all` as listed, its decode point first, while the average expert sees at most one routed row;
// then `small`-row tiles first, and `large` ones once the average expert has 32 rows.
std::vector<Point> grouped_defaults_for(const Shape& s, const Point& small, const Point& large,
                                        const std::vector<Point>& all);

// KernelFamily::bytes_moved and bytes_reread of a grouped expert GEMM over shape dims T, E, TOPK (set after
// its plan): of the expert stacks (every input but "x" and "ids") only the experts the rows reach move, and
// each of them is loaded once per block of bm routed rows it gets; the routed rows' activations are loaded
// once per column block where the family's loads in flight include them (`x_in_flight`).
void set_grouped_bytes(KernelFamily& f, bool x_in_flight);

}  // namespace qt::kernels::moe
