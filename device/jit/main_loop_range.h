#pragma once
// A kernel's main loop as both listings qtune reads take it (sass_mix.h from nvdisasm's SASS, ptx_main_loop.h
// from the PTX NVRTC returns): the longest range of code closed by a backward branch. Positions are the
// listing's own (SASS byte addresses, PTX instruction indices). A branch to itself, SASS's end-of-kernel trap,
// closes no range.
#include <cstdint>
#include <optional>
#include <vector>

namespace qt::compile {

struct CodeBranch {
  uint64_t at = 0;      // the branch
  uint64_t target = 0;  // where it goes
};

struct CodeRange {
  uint64_t first = 0, last = 0;  // inclusive: the target and the branch that closes the loop
};

// The longest [target, at] over the backward branches (the first of equals), or nothing without one.
inline std::optional<CodeRange> longest_backward_range(const std::vector<CodeBranch>& branches) {
  std::optional<CodeRange> best;
  for (const CodeBranch& b : branches)
    if (b.target < b.at && (!best || b.at - b.target > best->last - best->first)) best = CodeRange{b.target, b.at};
  return best;
}

}  // namespace qt::compile
