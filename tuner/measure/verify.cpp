#include "tuner/measure/verify.h"

#include <cmath>
#include <cstdio>

namespace qt::tune {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I8: return "i8";
    case DType::I32: return "i32";
  }
  return "?";
}

Tolerance default_tolerance(DType out, int64_t reduction_len, double ref_rms) {
  double eps = 0;
  switch (out) {
    case DType::F32: eps = std::ldexp(1.0, -24); break;
    case DType::F16: eps = std::ldexp(1.0, -11); break;
    case DType::BF16: eps = std::ldexp(1.0, -8); break;
    case DType::I8:
    case DType::I32: return {0, 0};
  }
  // fp32 accumulation underneath any storage type: sqrt(K) rounding steps of a typical magnitude.
  double acc = std::ldexp(1.0, -24) * std::sqrt(double(std::max<int64_t>(1, reduction_len))) * 8.0;
  return {acc * ref_rms + eps * ref_rms, 4.0 * eps};
}

VerifyResult verify_output(const float* ref, const float* out, size_t n, const Tolerance& tol) {
  VerifyResult r;
  for (size_t i = 0; i < n; ++i) {
    double a = ref[i], b = out[i];
    bool bad;
    if (!std::isfinite(b) && std::isfinite(a)) {
      ++r.non_finite;
      bad = true;
    } else {
      // Equal values (an infinity the reference also has included) are exact; inf - inf would read as NaN.
      double err = a == b ? 0 : std::fabs(a - b);
      if (std::isnan(err)) err = (std::isnan(a) && std::isnan(b)) ? 0 : INFINITY;
      r.max_abs_err = std::max(r.max_abs_err, err);
      if (a != 0 && std::isfinite(a)) r.max_rel_err = std::max(r.max_rel_err, err / std::fabs(a));
      // A non-finite reference value must be matched exactly: its relative tolerance would be infinite.
      bad = std::isfinite(a) ? err > tol.atol + tol.rtol * std::fabs(a) : err != 0;
    }
    if (bad) {
      if (r.mismatches == 0) r.first_bad = i;
      ++r.mismatches;
    }
  }
  r.ok = r.mismatches == 0;
  return r;
}

VerifyResult verify_output(const float* ref, const float* out, size_t n, DType dtype, int64_t reduction_len) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += double(ref[i]) * ref[i];
  double rms = n ? std::sqrt(ss / double(n)) : 0;
  return verify_output(ref, out, n, default_tolerance(dtype, reduction_len, rms));
}

std::string VerifyResult::summary() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%zu mismatches (%zu non-finite), first at %zu, max abs err %.3g, max rel err %.3g",
                mismatches, non_finite, first_bad, max_abs_err, max_rel_err);
  return buf;
}

}  // namespace qt::tune
