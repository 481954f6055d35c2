#pragma once
// Identity of a CUBIN's machine code. Two points of a family usually differ in their mangled kernel names
// even when ptxas emits the same instructions (a parameter the code never uses, two tile shapes that
// compile alike), so byte-identical files are rare; what matters for measuring is identical code. The
// code digest covers every ELF section's type, flags, size and contents except the symbol and string
// tables (where the names live) and takes section names without their per-kernel suffix.
#include <cstdint>
#include <string>
#include <vector>

namespace qt::compile {

// SHA-256 of the raw bytes.
std::string cubin_digest(const std::vector<uint8_t>& cubin);
// SHA-256 of the name-independent content; throws qt::Error if `cubin` is not a well-formed ELF64 file.
std::string code_digest(const std::vector<uint8_t>& cubin);

}  // namespace qt::compile
