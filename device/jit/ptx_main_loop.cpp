#include "device/jit/ptx_main_loop.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "device/jit/main_loop_range.h"

namespace qt::compile {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The lines of `entry`'s body: from the first line that is "{" after ".entry <entry>" to the "}" closing it
// (inline asm opens scopes of its own inside).
std::vector<std::string> entry_body(const std::string& ptx, const std::string& entry) {
  std::vector<std::string> body;
  std::istringstream in(ptx);
  std::string line;
  bool in_entry = false;
  int depth = 0;
  while (std::getline(in, line)) {
    const std::string s = trim(line);
    if (!in_entry) {
      const size_t at = s.find(".entry ");
      if (at == std::string::npos) continue;
      const std::string rest = trim(s.substr(at + 7));
      if (rest.compare(0, entry.size(), entry) == 0 &&
          (rest.size() == entry.size() || rest[entry.size()] == '(' || rest[entry.size()] == ' '))
        in_entry = true;
      continue;
    }
    if (s == "{") {
      ++depth;
      continue;
    }
    if (s == "}") {
      if (--depth == 0) break;
      continue;
    }
    if (depth > 0) body.push_back(s);
  }
  return body;
}

}  // namespace

int ptx_main_loop_instructions(const std::string& ptx, const std::string& entry) {
  std::vector<std::string> instructions;
  std::map<std::string, size_t> label_at;  // label -> index of the instruction after it
  for (const std::string& line : entry_body(ptx, entry)) {
    const std::string s = trim(line.substr(0, line.find("//")));  // PTX has no string operands to hold "//"
    if (s.empty() || s[0] == '.') continue;
    if (s.back() == ':') {
      label_at[s.substr(0, s.size() - 1)] = instructions.size();
      continue;
    }
    if (s.back() == ';') instructions.push_back(s);
  }
  std::vector<CodeBranch> branches;
  for (size_t i = 0; i < instructions.size(); ++i) {
    const std::string& s = instructions[i];
    const size_t bra = s.find("bra");
    if (bra == std::string::npos) continue;
    // The opcode is "bra" or "bra.uni", after an optional guard predicate ("@%p1 ", "@!%p2 ").
    const size_t op = s[0] == '@' ? s.find_first_not_of(" \t", s.find_first_of(" \t")) : 0;
    if (op != bra) continue;
    const size_t target = s.find_first_not_of(" \t", s.find_first_of(" \t", bra));
    if (target == std::string::npos) continue;
    const std::string label = trim(s.substr(target, s.find(';', target) - target));
    const auto it = label_at.find(label);
    if (it != label_at.end()) branches.push_back({i, it->second});
  }
  const std::optional<CodeRange> loop = longest_backward_range(branches);
  return loop ? static_cast<int>(loop->last - loop->first + 1) : 0;
}

}  // namespace qt::compile
