#include "runtime/gpu/blas_choice.h"

namespace qt::rt {

namespace {
constexpr int64_t kGemvRows = 8;
}

BlasDecision choose_blas(const winners::WinnersTable* table, const winners::DeviceFingerprint& fingerprint,
                         const std::string& store_prefix, const KernelChoice& family_choice,
                         const kernels::Shape& shape) {
  const int64_t m = shape.values.at(0);
  BlasDecision d;
  d.blas = m > kGemvRows;
  if (!table || !family_choice.family) return d;
  const auto blas = table->lookup(fingerprint, store_prefix + kBlasFamily, kBlasDtypes, shape.values, "");
  const kernels::KernelFamily& f = *family_choice.family;
  const auto ours = table->lookup(fingerprint, store_prefix + f.name, f.dtypes, shape.values, f.source_hash);
  if (!blas || !ours || !blas->exact || !ours->exact) return d;
  d.measured = true;
  d.blas = blas->median_s < ours->median_s;
  return d;
}

}  // namespace qt::rt
