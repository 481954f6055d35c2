#pragma once
// Where the tools find the files that ship with qtune (the Qwen3 tokenizer, the default model). The
// source tree's location is compiled in; QTUNE_HOME overrides it for installed or relocated copies.
#include <string>
#include <vector>

namespace qt {

std::string source_root();  // $QTUNE_HOME or the configured source directory
std::string binary_root();  // $QTUNE_BUILD or the configured build directory

// The real Qwen3 tokenizer.json shipped in models/tokenizers/qwen3/.
std::string default_hf_tokenizer_path();
// The small synthetic default model that scripts/setup.sh creates (in the build directory).
std::string default_model_path();

bool file_exists(const std::string& path);  // a regular file (or a link to one)
// "" when `path` is a regular file, else why it is not one: "no such file", "a folder, not a file", or "not a
// regular file (a FIFO, socket or device)", which a reader would block on or misread.
std::string regular_file_problem(const std::string& path);
// "" when a file can be written at `path` (its folder exists and is writable, and it is no folder itself), else
// why not: checked before long work whose result would otherwise be lost at the end.
std::string output_file_problem(const std::string& path);
// "" unless writing `out` would replace one of `inputs` (the same file, through links too): then which, so a
// tool refuses before it truncates what it is reading.
std::string overwrites_input(const std::string& out, const std::vector<std::string>& inputs);

}  // namespace qt
