#pragma once
// Test inputs the MoE families share: expert ids for routed rows that exercise the routing rules.
#include <cstdint>
#include <vector>

#include "common/rng.h"

namespace qt::kernels::moe {

// Expert ids [rows][k] by `pattern`:
//   0 skewed: low experts popular, expert E-1 never chosen when E > k (an expert with zero rows), distinct
//     within a token (as gating gives them);
//   1 every row to expert 0 (one expert takes everything);
//   2 uniform, repeats allowed.
std::vector<int32_t> routed_ids(int64_t rows, int64_t k, int64_t experts, int pattern, Rng& rng);

}  // namespace qt::kernels::moe
