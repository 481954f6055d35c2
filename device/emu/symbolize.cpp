#include "device/emu/symbolize.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

namespace qt::emu {

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

std::string symbolize_code_address(const void* code) {
  Dl_info info{};
  if (!dladdr(code, &info) || !info.dli_fname || !info.dli_fbase) return {};
  // The return address points after the call; step back into the calling instruction.
  const unsigned long offset =
      static_cast<unsigned long>(reinterpret_cast<uintptr_t>(code) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1);
  char off[32];
  std::snprintf(off, sizeof off, "0x%lx", offset);
  const std::string cmd = "addr2line -C -f -e " + shell_quote(info.dli_fname) + " " + off + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {};
  char fn[4096] = {}, loc[4096] = {};
  const bool ok = std::fgets(fn, sizeof fn, p) && std::fgets(loc, sizeof loc, p);
  ::pclose(p);
  if (!ok) return {};
  std::string l = trim(loc), f = trim(fn);
  if (l.rfind("??", 0) == 0) return {};
  if (const size_t disc = l.find(" (discriminator"); disc != std::string::npos) l.resize(disc);
  if (const size_t slash = l.rfind('/'); slash != std::string::npos) l = l.substr(slash + 1);
  return l + " in " + f;
}

}  // namespace qt::emu
