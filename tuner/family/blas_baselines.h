#pragma once
// The vendor baselines the tuner times beside our kernels, so that the measured batch dispatch can choose
// them where they win:
//   cublaslt_f16          y = x W^T on fp16 weights [N][K] (cuBLASLt: tensor ops, fp32 accumulation), the
//                         GEMM of fp16 weights and of weights dequantized at load (qrun --predequantize);
//   awq_dequant_cublaslt  AWQ weights dequantized by our awq_dequant kernel to fp16 [K][N], then that GEMM.
// Each is described as a KernelFamily outside the registry (it has no kernel source of its own). Its one
// parameter is the rank of cuBLASLt's heuristic candidate (0: the heuristic's own choice); its inputs and CPU
// reference are those of the registry family solving the same problem (f16_gemm, awq_gemm), so a baseline is
// verified exactly like our kernels before it may win. Its source hash names the cuBLASLt version.
#include <memory>
#include <string>
#include <vector>

#include "device/blas/blas_lt.h"
#include "kernels_src/registry/family.h"
#include "tuner/family/family.h"

namespace qt::tune {

inline constexpr const char* kCublasF16 = blas::kStoreNameF16;
inline constexpr const char* kAwqDequantCublas = blas::kStoreNameAwqDequant;

std::vector<const kernels::KernelFamily*> blas_baselines();
// The baseline of that name ("cublaslt_f16"), or null.
const kernels::KernelFamily* find_blas_baseline(const std::string& name);
bool is_blas_baseline(const kernels::KernelFamily& f);
// The baseline for a linear family's weight type at its shapes: cublaslt_f16 for F16, awq_dequant_cublaslt for
// AWQ, else null.
const kernels::KernelFamily* blas_baseline_for(WeightType t);

// In the worker: one instance of the baseline on `device_kind`'s device ("cuda"; on the emulator every point
// fails with the reason).
std::unique_ptr<KernelInstance> make_blas_instance(const kernels::KernelFamily& f, const std::string& device_kind,
                                                   const kernels::Shape& shape);

}  // namespace qt::tune
