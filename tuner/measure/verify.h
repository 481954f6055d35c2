#pragma once
// Output check against a family's reference with tolerances that follow the output dtype and the length
// of the reduction behind each element: |out - ref| <= atol + rtol * |ref| element-wise, where rtol is a
// few units of the dtype's rounding and atol scales with sqrt(K) rounding steps of the output's RMS
// (accumulation order differs between candidates and the reference). NaN/Inf where the reference is finite
// always fails. Integers compare exactly.
#include <cstddef>
#include <cstdint>
#include <string>

namespace qt::tune {

enum class DType { F32, F16, BF16, I8, I32 };

const char* dtype_name(DType d);

struct Tolerance {
  double atol = 0, rtol = 0;
};

// `ref_rms`: root mean square of the reference output; `reduction_len`: terms summed per output element.
Tolerance default_tolerance(DType out, int64_t reduction_len, double ref_rms);

struct VerifyResult {
  bool ok = true;
  size_t mismatches = 0;
  size_t non_finite = 0;
  size_t first_bad = 0;
  double max_abs_err = 0, max_rel_err = 0;
  std::string summary() const;
};

VerifyResult verify_output(const float* ref, const float* out, size_t n, const Tolerance& tol);
// Convenience: default tolerance from the reference itself.
VerifyResult verify_output(const float* ref, const float* out, size_t n, DType dtype, int64_t reduction_len);

}  // namespace qt::tune
