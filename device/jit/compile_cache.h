#pragma once
// Persistent on-disk cache of NVRTC results. The key is a SHA-256 over everything that can change the
// CUBIN: program source, the text of every repository header it includes, options, name expressions,
// target architecture, the NVRTC version and the CUDA include directory. Entries are two files,
// <key>.cubin and <key>.json; writes go to a temporary name and are renamed, so concurrent processes
// never see half an entry, and an entry whose CUBIN no longer matches its recorded digest is a miss.
#include <optional>
#include <string>

#include "device/jit/nvrtc_compiler.h"

namespace qt::compile {

// $QTUNE_CACHE_DIR, else $XDG_CACHE_HOME/qtune/nvrtc, else $HOME/.cache/qtune/nvrtc.
std::string default_cache_dir();

std::string cache_key(const CompileRequest& req);

class CompileCache {
 public:
  explicit CompileCache(std::string dir);
  const std::string& dir() const { return dir_; }
  std::optional<CompileOutput> load(const std::string& key) const;
  void store(const std::string& key, const CompileOutput& out) const;

 private:
  std::string dir_;
};

}  // namespace qt::compile
