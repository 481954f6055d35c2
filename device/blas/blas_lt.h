#pragma once
// FP16 GEMM through cuBLASLt on a CudaDevice's stream: tensor ops, fp32 accumulation, the algorithm cuBLASLt's
// heuristic ranks first for each problem (asked once per problem, then kept). libcublasLt is loaded on first
// use; without it, or without a GPU, BlasLt's constructor throws qt::Error with exit code 3 and the reason.
//
// The problem is the runtime's: y[M][N] = x[M][K] * W^T, all row-major fp16. W is either [N][K] (the fp16
// "values" of a weight, what q8_0_dequant writes) or [K][N] (what awq_dequant and the frag dequants write).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

#include "device/api/device.h"
#include "models/core/weight_traits.h"

namespace qt::blas {

// "" when libcublasLt can be loaded and provides every entry point used here, else why not. Does not need a GPU.
std::string blas_lt_unavailable_reason();
// cuBLASLt's version (e.g. 130100) once loaded, else 0.
size_t blas_lt_version();

enum class WeightLayout { NK, KN };

// Store names of the cuBLASLt baselines (after the device prefix, "cuda."): the tuner times them beside our
// kernels under these names, and the runtime runs them when the stored dispatch ranks them first.
// The dequant + cuBLASLt ones run their type's dequant kernel first (kBaselines below).
inline constexpr const char* kStoreNameF16 = "cublaslt_f16";  // fp16 weights [N][K]
inline constexpr const char* kStoreNameAwqDequant = "awq_dequant_cublaslt";
inline constexpr const char* kStoreNameAwqFragDequant = "awq_frag_dequant_cublaslt";
inline constexpr const char* kStoreNameInt8GwDequant = "int8gw_dequant_cublaslt";
inline constexpr const char* kStoreNameQ8_0Dequant = "q8_0_dequant_cublaslt";
inline constexpr const char* kStoreNameQ8_0FragDequant = "q8_0_frag_dequant_cublaslt";

// What the tuner and the runtime both need to know of a baseline, one row per weight type and layout, so that
// neither keeps its own copy: the registry family solving the same linear on the same device arrays (its op names the
// dispatch the baseline ranks in, hence the weights' layout; its dtypes key the stored results; its inputs and
// CPU reference verify the baseline), the registry family that writes the fp16 weights "w" from those arrays
// (none: the weights are fp16 "values" already), and the layout of the fp16 weights the GEMM reads.
struct Baseline {
  const char* store_name;
  WeightType weight_type;
  const char* problem_family;
  const char* dequant_family;  // nullptr for fp16 weights
  WeightLayout layout;
};
inline constexpr Baseline kBaselines[] = {
    {kStoreNameF16, WeightType::F16, "f16_gemm", nullptr, WeightLayout::NK},
    // AWQ in the file layout (the runtime's without the frag layout) and in the frag layout (its default).
    {kStoreNameAwqDequant, WeightType::AWQ_INT4, "awq_gemm", "awq_dequant", WeightLayout::KN},
    {kStoreNameAwqFragDequant, WeightType::AWQ_INT4, "awq_frag_gemm", "awq_frag_dequant", WeightLayout::KN},
    // The frag layout, where the runtime holds INT8 group-wise projections by default.
    {kStoreNameInt8GwDequant, WeightType::INT8_GW_SYM, "int8gw_frag_gemm", "int8gw_frag_dequant", WeightLayout::KN},
    // Q8_0 in the file layout (the lm_head, and every projection with --weight-layout file): its [N][K] is the
    // GEMM's own. In the frag layout (the projections' default), the 8-bit frag dequant writes [K][N].
    {kStoreNameQ8_0Dequant, WeightType::Q8_0, "q8_0_gemm", "q8_0_dequant", WeightLayout::NK},
    {kStoreNameQ8_0FragDequant, WeightType::Q8_0, "q8_0_frag_gemm", "q8_0_frag_dequant", WeightLayout::KN},
};
// The row of that store name (without the device prefix), or null.
const Baseline* find_baseline(std::string_view store_name);
// The row for weights of that type as the linear op `op` reads them (its problem family's op: "linear" for
// the file layout, "linear.frag" for the frag layout), or null.
const Baseline* baseline_for(WeightType t, const std::string& op);

class BlasLt {
 public:
  // `device` must be a cuda::CudaDevice (the emulator has no cuBLAS: exit 3).
  explicit BlasLt(dev::Device& device, size_t workspace_bytes = size_t(32) << 20);
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  // Queues the GEMM on the device's stream (also while the device captures a graph: the heuristic is asked the
  // first time a problem is seen, which must be outside a capture; `prepare` does that ahead of time).
  // `rank` picks among the heuristic's candidates, best first (0: its choice; the tuner times the others).
  void gemm_f16(dev::DevPtr w, WeightLayout layout, dev::DevPtr x, dev::DevPtr y, int64_t m, int64_t n, int64_t k,
                int rank = 0);
  void prepare(WeightLayout layout, int64_t m, int64_t n, int64_t k);
  // How many algorithms the heuristic offers for the problem (at most kMaxRanks).
  int algorithms(WeightLayout layout, int64_t m, int64_t n, int64_t k);
  static constexpr int kMaxRanks = 4;
  // "cuBLASLt 13.1.0 algo 21 tile 15 stages 8 ..." for reports: the version and the ranked algorithm's ids.
  std::string describe(WeightLayout layout, int64_t m, int64_t n, int64_t k, int rank = 0);

 private:
  struct Plan;
  Plan& plan(WeightLayout layout, int64_t m, int64_t n, int64_t k);
  dev::Device& device_;
  void* handle_ = nullptr;
  dev::Buffer workspace_;
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
};

}  // namespace qt::blas
