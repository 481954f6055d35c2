#pragma once
// Turns a code address inside a JIT-compiled kernel module into "file.cu:42 (function)" for error reports,
// using the module's line tables (modules are built with -g1) through binutils' addr2line.
#include <string>

namespace qt::emu {

// Empty when the address is not in a loaded shared object or addr2line is unavailable.
std::string symbolize_code_address(const void* code);

}  // namespace qt::emu
