#pragma once
// FP16 GEMM through cuBLASLt on a CudaDevice's stream: tensor ops, fp32 accumulation, the algorithm cuBLASLt's
// heuristic ranks first for each problem (asked once per problem, then kept). libcublasLt is loaded on first
// use; without it, or without a GPU, BlasLt's constructor throws qt::Error with exit code 3 and the reason.
//
// The problem is the runtime's: y[M][N] = x[M][K] * W^T, all row-major fp16. W is either [N][K] (the fp16
// "values" of a weight) or [K][N] (what awq_dequant writes).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "device/api/device.h"

namespace qt::blas {

// "" when libcublasLt can be loaded and provides every entry point used here, else why not. Does not need a GPU.
std::string blas_lt_unavailable_reason();
// cuBLASLt's version (e.g. 130100) once loaded, else 0.
size_t blas_lt_version();

enum class WeightLayout { NK, KN };

// Store names of the cuBLASLt baselines (after the device prefix, "cuda."): the tuner times them beside our
// kernels under these names, and the runtime runs them when the stored dispatch ranks them first.
inline constexpr const char* kStoreNameF16 = "cublaslt_f16";                 // fp16 weights [N][K]
inline constexpr const char* kStoreNameAwqDequant = "awq_dequant_cublaslt";  // awq_dequant, then the GEMM

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
