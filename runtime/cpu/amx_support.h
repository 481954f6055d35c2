#pragma once
// Whether this process may run AMX-INT8 tile instructions, decided once: the CPU must report AMX-TILE and
// AMX-INT8 (cpuid leaf 7) with palette 1 at least 8 tiles of 16 rows x 64 bytes (leaf 0x1d), the OS must
// manage the tile state (XCR0 bits 17 and 18), and Linux must grant this process the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the first tile instruction is killed by
// SIGILL). The permission is per process, so asking once, before any thread uses a tile, covers all threads.
#include <string>

namespace qt::rt {

struct AmxSupport {
  bool usable = false;
  std::string detail;  // why not, or what was found
};

const AmxSupport& amx_support();

}  // namespace qt::rt
