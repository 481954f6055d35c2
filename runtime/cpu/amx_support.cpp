#include "runtime/cpu/amx_support.h"

#include <asm/prctl.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/amx_tiles.h"

namespace qt::rt {
namespace {

constexpr unsigned kXfeatureXtilecfg = 17, kXfeatureXtiledata = 18;  // XSAVE state components of AMX

// xgetbv(0) as text: its intrinsic needs -mxsave, which this translation unit must not be built with.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

AmxSupport detect() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return {false, "cpuid has no leaf 7"};
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  if (!tile || !int8) return {false, "the CPU has no AMX-TILE/AMX-INT8 (cpuid leaf 7)"};
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return {false, "the OS has not enabled XSAVE"};
  const uint64_t xcr = xcr0();
  if (!(xcr & (1ull << kXfeatureXtilecfg)) || !(xcr & (1ull << kXfeatureXtiledata)))
    return {false, "the OS does not manage the AMX tile state (XCR0 bits 17 and 18)"};
  if (!__get_cpuid_count(0x1d, 0, &a, &b, &c, &d) || a < 1) return {false, "cpuid reports no tile palette 1"};
  __get_cpuid_count(0x1d, 1, &a, &b, &c, &d);
  const unsigned bytes_per_row = b & 0xffff, names = b >> 16, max_rows = c & 0xffff;
  if (bytes_per_row < kTileMaxColsb || names < kTileCount || max_rows < kTileMaxRows)
    return {false, "palette 1 has " + std::to_string(names) + " tiles of " + std::to_string(max_rows) + " x " +
                       std::to_string(bytes_per_row) + " bytes, fewer than 8 of 16 x 64"};
  if (::syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, kXfeatureXtiledata) != 0)
    return {false, std::string("Linux refused the tile permission (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
                       std::strerror(errno) + ")"};
  unsigned long granted = 0;
  if (::syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &granted) != 0 || !(granted & (1ul << kXfeatureXtiledata)))
    return {false, "Linux did not grant the tile permission (ARCH_GET_XCOMP_PERM)"};
  return {true, "AMX-INT8, palette 1, tile permission granted"};
}

}  // namespace

const AmxSupport& amx_support() {
  static const AmxSupport support = detect();
  return support;
}

}  // namespace qt::rt
