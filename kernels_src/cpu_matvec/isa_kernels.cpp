#include "kernels_src/cpu_matvec/isa_kernels.h"

#include <cpuid.h>

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace qt::rt {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvxVnni: return "avx-vnni";
    case Isa::kAvx512Vnni: return "avx512-vnni";
  }
  return "?";
}

bool isa_from_name(const char* name, Isa* isa) {
  for (Isa i : kAllIsas)
    if (std::string(name) == isa_name(i)) {
      *isa = i;
      return true;
    }
  return false;
}

namespace {
// F16C through cpuid (leaf 1, ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

// AVX-VNNI through cpuid (leaf 7 sub-leaf 1, EAX bit 4), for the same reason. The OS's saving of the ymm state is
// what avx2 already asks.
bool has_avx_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
}
}  // namespace

bool isa_supported(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::kAvxVnni: return isa_supported(Isa::kAvx2) && has_avx_vnni();
    case Isa::kAvx512Vnni:
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

namespace {
constexpr Isa kFastestFirst[] = {Isa::kAvx512Vnni, Isa::kAvxVnni, Isa::kAvx2, Isa::kScalar};

bool same_dot_products(const CpuKernels& a, const CpuKernels& b) {
  return a.dot_i8 == b.dot_i8 && a.dot_i8_x4 == b.dot_i8_x4 && a.dot_u4 == b.dot_u4 && a.dot_f32 == b.dot_f32 &&
         a.dot_f16 == b.dot_f16 && a.dot_bf16 == b.dot_bf16;
}
}  // namespace

Isa detect_isa() {
  for (Isa isa : kFastestFirst)
    if (isa_supported(isa)) return isa;
  return Isa::kScalar;
}

Isa fastest_with_dot_products_of(Isa isa) {
  for (Isa i : kFastestFirst)
    if (isa_supported(i) && same_dot_products(kernels_for(i), kernels_for(isa))) return i;
  return isa;
}

const CpuKernels& kernels_for(Isa isa) {
  if (!isa_supported(isa)) throw Error(std::string("this CPU cannot run the ") + isa_name(isa) + " kernels");
  switch (isa) {
    case Isa::kAvx512Vnni: return kAvx512Kernels;
    case Isa::kAvxVnni: return kAvxVnniKernels;
    case Isa::kAvx2: return kAvx2Kernels;
    case Isa::kScalar: break;
  }
  return kScalarKernels;
}

}  // namespace qt::rt
