#pragma once
// The files a compile reads besides its source: the quoted #include graph, for cache keys that must change
// when any of them does. Shared by the NVRTC compile cache and the emulator's host JIT so that both see the
// same graph. <system> includes are left out: the compiler's version stands for them.
#include <string>
#include <vector>

namespace qt::compile {

struct IncludedFile {
  std::string path;  // absolute and canonical: a file reached under two spellings is listed once
  std::string text;
};

// Every file `source` reaches through #include "name" lines, transitively, each once, in the order first
// met (depth first). A name is looked up in the including file's folder (`source_dir` for `source` itself,
// skipped when empty), then in each of `search_dirs` in turn. A name found nowhere is left out: a header
// that is really missing is the compiler's to report.
std::vector<IncludedFile> quoted_includes(const std::string& source, const std::string& source_dir,
                                          const std::vector<std::string>& search_dirs);

}  // namespace qt::compile
