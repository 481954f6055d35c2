#include "device/jit/source_includes.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/paths.h"

namespace qt::compile {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The name between the quotes of an `#include "name"` line; empty for any other line.
std::string quoted_include_name(const std::string& line) {
  size_t p = line.find_first_not_of(" \t");
  if (p == std::string::npos || line[p] != '#') return {};
  p = line.find_first_not_of(" \t", p + 1);
  if (p == std::string::npos || line.compare(p, 7, "include") != 0) return {};
  const size_t open = line.find('"', p + 7);
  if (open == std::string::npos) return {};
  const size_t close = line.find('"', open + 1);
  if (close == std::string::npos) return {};
  return line.substr(open + 1, close - open - 1);
}

class IncludeScan {
 public:
  explicit IncludeScan(const std::vector<std::string>& search_dirs)
      : search_dirs_(search_dirs.begin(), search_dirs.end()) {}

  // Lists the files `text`, living in `dir`, includes and recurses into each one met for the first time.
  void scan(const std::string& text, const fs::path& dir) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const std::string name = quoted_include_name(line);
      if (name.empty()) continue;
      const fs::path file = resolve(name, dir);
      if (file.empty()) continue;
      std::error_code ec;
      std::string canon = fs::weakly_canonical(file, ec).string();
      if (!seen_.insert(canon).second) continue;
      const std::string body = read_text(file);
      found_.push_back(IncludedFile{std::move(canon), body});
      scan(body, file.parent_path());
    }
  }

  std::vector<IncludedFile> take() { return std::move(found_); }

 private:
  // The first existing candidate for `name`, or empty.
  fs::path resolve(const std::string& name, const fs::path& dir) const {
    if (!dir.empty() && file_exists((dir / name).string())) return dir / name;
    for (const fs::path& d : search_dirs_) {
      if (file_exists((d / name).string())) return d / name;
    }
    return {};
  }

  std::vector<fs::path> search_dirs_;
  std::set<std::string> seen_;
  std::vector<IncludedFile> found_;
};

}  // namespace

std::vector<IncludedFile> quoted_includes(const std::string& source, const std::string& source_dir,
                                          const std::vector<std::string>& search_dirs) {
  IncludeScan s(search_dirs);
  s.scan(source, fs::path(source_dir));
  return s.take();
}

}  // namespace qt::compile
