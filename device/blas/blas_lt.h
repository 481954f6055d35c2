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

class BlasLt {
 public:
  // `device` must be a cuda::CudaDevice (the emulator has no cuBLAS: exit 3).
  explicit BlasLt(dev::Device& device, size_t workspace_bytes = size_t(32) << 20);
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  // Queues the GEMM on the device's stream (also while the device captures a graph: the heuristic is asked the
  // first time a problem is seen, which must be outside a capture; `prepare` does that ahead of time).
  void gemm_f16(dev::DevPtr w, WeightLayout layout, dev::DevPtr x, dev::DevPtr y, int64_t m, int64_t n, int64_t k);
  void prepare(WeightLayout layout, int64_t m, int64_t n, int64_t k);
  // "cuBLASLt 13.1.0, algo 21 (tile ...)" style text for reports: the version and the chosen algorithm's id.
  std::string describe(WeightLayout layout, int64_t m, int64_t n, int64_t k);

 private:
  struct Plan;
  Plan& plan(WeightLayout layout, int64_t m, int64_t n, int64_t k);
  dev::Device& device_;
  void* handle_ = nullptr;
  dev::Buffer workspace_;
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
};

}  // namespace qt::blas
