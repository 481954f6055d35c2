// Programmatic dependent launch (qrun --pdl) lets a kernel start while the one before it in the stream still
// runs, so every kernel the runtime can launch must wait for it first: qt::grid_dependency_entry() as its first
// statement (kernels_src/common/qt_cuda_gpu.h), or after a region that opens with the line
// "// PDL: before the wait", which says what it reads and why no recent kernel writes it. A kernel without
// either would read its inputs before they are written, on a GPU only, and only sometimes. This reads every
// kernel source and names any kernel that has neither.
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/paths.h"

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The index just past the parenthesised group that opens at `open`.
size_t past_group(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

struct Kernel {
  std::string file, name;
  bool waits = false;
};

// Each __global__ function in `text`: its name and whether its body opens with the entry call.
std::vector<Kernel> kernels_in(const std::string& file, const std::string& text) {
  std::vector<Kernel> out;
  for (size_t at = text.find("__global__"); at != std::string::npos; at = text.find("__global__", at + 1)) {
    const size_t line = text.rfind('\n', at) + 1;
    if (text.substr(line, at - line).find("//") != std::string::npos) continue;  // a mention in a comment
    size_t pos = at + 10;
    size_t open = text.find('(', pos);
    // __launch_bounds__(...) comes before the name: skip it.
    while (open != std::string::npos && text.substr(pos, open - pos).find("__launch_bounds__") != std::string::npos) {
      pos = past_group(text, open);
      open = text.find('(', pos);
    }
    if (open == std::string::npos) break;
    size_t name_end = open;
    while (name_end > pos && text[name_end - 1] == ' ') --name_end;
    size_t name_begin = name_end;
    while (name_begin > pos && (std::isalnum(static_cast<unsigned char>(text[name_begin - 1])) || text[name_begin - 1] == '_'))
      --name_begin;
    Kernel k{file, text.substr(name_begin, name_end - name_begin)};
    const size_t body = text.find('{', past_group(text, open));
    const size_t first = text.find_first_not_of(" \t\r\n", body + 1);
    const std::string entry = "qt::grid_dependency_entry();", region = "// PDL: before the wait";
    k.waits = first != std::string::npos && text.compare(first, entry.size(), entry) == 0;
    // A marked region first, then the entry at the body's own level (not inside a block that may not run).
    if (!k.waits && first != std::string::npos && text.compare(first, region.size(), region) == 0) {
      int depth = 0;
      for (size_t i = body + 1; i < text.size() && depth >= 0; ++i) {
        if (text[i] == '{') ++depth;
        if (text[i] == '}') --depth;
        if (depth == 0 && text.compare(i, entry.size(), entry) == 0) {
          k.waits = true;
          break;
        }
      }
    }
    out.push_back(k);
  }
  return out;
}

}  // namespace

TEST_CASE("every kernel waits for the previous kernel in its first statement") {
  const std::filesystem::path root = std::filesystem::path(qt::source_root()) / "kernels_src";
  std::vector<Kernel> all;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cuh" && ext != ".h")) continue;
    // The two halves of qt_cuda.h define __global__ itself, and no kernel.
    if (e.path().filename().string().starts_with("qt_cuda")) continue;
    for (const Kernel& k : kernels_in(e.path().lexically_relative(root).string(), slurp(e.path()))) all.push_back(k);
  }
  // Every family's kernels: the GEMVs, GEMMs, attention, norms, MoE routing and the rest.
  CHECK(all.size() >= 40);
  for (const Kernel& k : all) {
    INFO(k.file << ": " << k.name);
    CHECK(k.waits);
  }
}

TEST_CASE("the kernel source reader finds a kernel that does not wait, behind launch bounds, comments and marked regions") {
  const std::string text =
      "// __global__ in a comment\n"
      "template <int T>\n__global__ void __launch_bounds__(T, 1)\n    good_kernel(int* a) {\n  qt::grid_dependency_entry();\n}\n"
      "__global__ void bad_kernel(int* a, int (*f)(int)) {\n  a[0] = 1;\n  qt::grid_dependency_entry();\n}\n"
      "__global__ void marked_kernel(int* a) {\n  // PDL: before the wait, a prefetch\n  int b = 1;\n"
      "  qt::grid_dependency_entry();\n  a[0] = b;\n}\n"
      "__global__ void nested_kernel(int* a) {\n  // PDL: before the wait\n  if (a) {\n"
      "    qt::grid_dependency_entry();\n  }\n  a[0] = 1;\n}\n";
  const std::vector<Kernel> k = kernels_in("t.cuh", text);
  REQUIRE(k.size() == 4);
  CHECK(k[0].name == "good_kernel");
  CHECK(k[0].waits);
  CHECK(k[1].name == "bad_kernel");
  CHECK(!k[1].waits);
  CHECK(k[2].name == "marked_kernel");
  CHECK(k[2].waits);
  CHECK(k[3].name == "nested_kernel");  // a wait some threads may skip is no wait
  CHECK(!k[3].waits);
}
