#pragma once
// Host JIT for the emulator: compiles a kernel module (kernel source + an export trailer for the requested
// name expressions) with the host C++ compiler into a shared object, cached on disk by a hash of everything
// that can change the result: source, included project headers, name expressions, defines, flags, the
// compiler's identity and the emulator ABI version.
#include <string>
#include <vector>

#include "device/api/device.h"

namespace qt::emu {

struct JitOptions {
  std::string compiler;   // empty: $QTUNE_EMU_CXX, else "g++"
  std::string opt_level = "-O1";
  bool instrument = true;  // access hooks for race / bounds / alignment checks
  int arch = 80;           // QT_ARCH seen by the kernel
  std::string cache_dir;   // empty: default_cache_dir()
};

struct JitResult {
  std::string so_path;
  std::string key;
  bool cache_hit = false;
  double seconds = 0;  // wall time of this call
};

// $QTUNE_EMU_CACHE, else $XDG_CACHE_HOME/qtune/emu, else $HOME/.cache/qtune/emu.
std::string default_cache_dir();
// The full translation unit compiled for `src`: its text (with a #line naming the module) plus the trailer.
std::string module_translation_unit(const dev::ModuleSource& src);
JitResult jit_compile(const dev::ModuleSource& src, const JitOptions& opts);

}  // namespace qt::emu
