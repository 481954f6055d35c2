#pragma once
// The real AMX tile instructions behind the interface of amx_tiles.h, as inline assembly. Include only from a
// translation unit whose AMX code runs after amx_usable() (amx_support.h) said yes: executed elsewhere, these
// instructions fault.
//
// Why assembly and not GCC's <immintrin.h> intrinsics:
//   - GCC 12's _tile_loadconfig passes its operand as "m" (*(const void **) config): the compiler is told
//     that LDTILECFG reads 8 bytes, so at -O3 it may drop or delay the stores to the other 56 bytes of the
//     configuration (this is what makes llama.cpp's AMX path fault on its first ldtilecfg when GCC 12
//     builds it). Here the operand is the whole 64-byte TileConfig object.
//   - GCC 12's _tile_loadd and _tile_stored name their memory only as an address in a register, with no
//     memory operand or clobber, so the compiler may move ordinary loads and stores of those bytes across
//     them. Every instruction here that reads or writes memory clobbers "memory".
// No -mamx-* flag is needed: the compiler only passes the text to the assembler (binutils >= 2.36).
// AT&T operand order: sources first, the destination last (TDPBSUD C += A . B is "tdpbsud B, A, C").
#include <cstdint>

#include "runtime/cpu/amx_tiles.h"

namespace qt::rt {

struct AmxHwTiles {
  static AmxHwTiles& this_thread() {
    static AmxHwTiles stateless;  // the state lives in the core's tile registers
    return stateless;
  }
  void configure(const TileConfig& cfg) { __asm__ volatile("ldtilecfg %0" : : "m"(cfg)); }
  void release() { __asm__ volatile("tilerelease" ::: "memory"); }
  template <int T>
  void load(const void* base, int64_t stride) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" : : "r"(base), "r"(stride), "n"(T) : "memory");
  }
  template <int T>
  void store(void* base, int64_t stride) {
    __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" : : "r"(base), "r"(stride), "n"(T) : "memory");
  }
  template <int C, int A, int B>
  void dpbsud() {
    static_assert(C != A && C != B && A != B, "TDPBSUD's three tiles must differ");
    __asm__ volatile("tdpbsud %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "n"(C), "n"(A), "n"(B));
  }
};

}  // namespace qt::rt
