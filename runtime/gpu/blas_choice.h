#pragma once
// Where a linear layer runs when cuBLASLt is at hand (a GPU, with --predequantize or a tuned cache):
//   measured: the tuning store's dispatch for the shape ranks cuBLASLt ("cuda.cublaslt_f16", or AWQ's
//             "cuda.awq_dequant_cublaslt") first in the batch's bucket -> cuBLASLt (kernel_choice.h's external
//             choice, at the heuristic candidate the tuner found fastest);
//   default:  with no dispatch, fp16 weights (predequantized) go to cuBLASLt above the decode GEMVs' rows
//             (M > 8), where a tensor-core GEMM is the right tool and cuBLASLt's heuristic is the vendor's tuned
//             choice, and to the fp16 GEMV at M <= 8; quantized weights stay on our kernels.
#include <cstdint>

namespace qt::rt {

inline bool default_prefers_blas(int64_t m) { return m > 8; }

}  // namespace qt::rt
