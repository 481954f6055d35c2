#pragma once
// Where a predequantized fp16 linear layer runs: cuBLASLt or the fp16 kernel family the chooser picked.
//   measured: the tuning store holds both times for this device and exact shape -> the faster one;
//   default:  otherwise cuBLASLt above the decode GEMVs' rows (M > 8), where a tensor-core GEMM is the right
//             tool and cuBLASLt's heuristic is the vendor's tuned choice, and the fp16 GEMV at M <= 8.
// cuBLASLt's times are stored like a family's, as "<prefix>cublaslt_f16" with dtypes kBlasDtypes at shape
// {M, N, K, G}, so that `qtune` measures it beside our kernels and the crossover is learned per shape.
#include <string>

#include "device/winners/winners.h"
#include "kernels_src/registry/family.h"
#include "runtime/gpu/kernel_choice.h"

namespace qt::rt {

inline constexpr const char* kBlasFamily = "cublaslt_f16";
inline constexpr const char* kBlasDtypes = "f16xf16->f16";

struct BlasDecision {
  bool blas = false;
  bool measured = false;  // both times came from the store
};

BlasDecision choose_blas(const winners::WinnersTable* table, const winners::DeviceFingerprint& fingerprint,
                         const std::string& store_prefix, const KernelChoice& family_choice,
                         const kernels::Shape& shape);

}  // namespace qt::rt
