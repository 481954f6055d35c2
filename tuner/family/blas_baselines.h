#pragma once
// The vendor baselines the tuner times beside our kernels, so that the measured batch dispatch can choose
// them where they win, one per row of device/blas's table of baselines:
//   cublaslt_f16             y = x W^T on fp16 weights [N][K] (cuBLASLt: tensor ops, fp32 accumulation), the
//                            GEMM of fp16 weights and of weights dequantized at load (qrun --predequantize);
//   awq_dequant_cublaslt     AWQ weights (file layout) dequantized by awq_dequant to fp16 [K][N], then that GEMM;
//   awq_frag_dequant_cublaslt  AWQ weights (frag layout) dequantized by awq_frag_dequant to fp16 [K][N], then
//                            that GEMM;
//   int8gw_dequant_cublaslt  INT8 group-wise weights (frag layout) dequantized by int8gw_frag_dequant to fp16
//                            [K][N], then that GEMM;
//   q8_0_dequant_cublaslt    Q8_0 weights (file layout) dequantized by q8_0_dequant to fp16 [N][K], then that GEMM;
//   q8_0_frag_dequant_cublaslt  Q8_0 weights (frag layout) dequantized by q8_0_frag_dequant to fp16 [K][N],
//                            then that GEMM.
// Each is described as a KernelFamily outside the registry (it has no kernel source of its own). Its one
// parameter is the rank of cuBLASLt's heuristic candidate (0: the heuristic's own choice); its op, inputs and
// CPU reference are those of the registry family solving the same problem on the same arrays (f16_gemm,
// awq_gemm, awq_frag_gemm, int8gw_frag_gemm, q8_0_gemm, q8_0_frag_gemm), so a baseline ranks in that family's dispatch and is verified
// exactly like our kernels before it may win. Its source hash names the cuBLASLt version.
#include <memory>
#include <string>
#include <vector>

#include "device/blas/blas_lt.h"
#include "kernels_src/registry/family.h"
#include "tuner/family/family.h"

namespace qt::tune {


std::vector<const kernels::KernelFamily*> blas_baselines();
// The baseline of that name ("cublaslt_f16"), or null.
const kernels::KernelFamily* find_blas_baseline(const std::string& name);
bool is_blas_baseline(const kernels::KernelFamily& f);
// The baseline beside a linear family of weight type `t` and op `op` (the weights' layout), at its shapes (the
// table's row for them), else null.
const kernels::KernelFamily* blas_baseline_for(WeightType t, const std::string& op);

// In the worker: one instance of the baseline on `device_kind`'s device ("cuda"; on the emulator every point
// fails with the reason).
std::unique_ptr<KernelInstance> make_blas_instance(const kernels::KernelFamily& f, const std::string& device_kind,
                                                   const kernels::Shape& shape);

}  // namespace qt::tune
