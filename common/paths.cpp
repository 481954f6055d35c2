#include "common/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <cstdlib>

namespace qt {

std::string source_root() {
  if (const char* home = std::getenv("QTUNE_HOME"); home && *home) return home;
  return QTUNE_SOURCE_DIR;
}

std::string binary_root() {
  if (const char* b = std::getenv("QTUNE_BUILD"); b && *b) return b;
  return QTUNE_BINARY_DIR;
}

std::string default_hf_tokenizer_path() { return source_root() + "/models/tokenizers/qwen3/tokenizer.json"; }

std::string default_model_path() { return binary_root() + "/default-model/qwen3-default.bin"; }

std::string regular_file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "no such file";
  if (S_ISDIR(st.st_mode)) return "a folder, not a file";
  if (!S_ISREG(st.st_mode)) return "not a regular file (a FIFO, socket or device)";
  return "";
}

std::string output_file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "a folder, not a file";
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0) return "its folder " + dir + " does not exist";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::access(dir.c_str(), W_OK) != 0) return "its folder " + dir + " is not writable";
  return "";
}

std::string overwrites_input(const std::string& out, const std::vector<std::string>& inputs) {
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!in.empty() && std::filesystem::equivalent(out, in, ec))
      return out + " is the input " + in + ": writing it would destroy what is being read; choose another name";
  }
  return "";
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace qt
