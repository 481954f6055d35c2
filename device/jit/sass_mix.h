#pragma once
// The SASS instruction mix of a kernel's main loop, read from a CUBIN with nvdisasm (not part of the CUDA
// toolkit's compiler packages; PyPI nvidia-cuda-nvdisasm provides it). The main loop is the longest range
// closed by a backward branch; its instructions are counted by class.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qt::compile {

// nvdisasm's path: $QTUNE_NVDISASM, else PATH, else the CUDA toolkit's bin, else the nvidia-* Python
// packages' bin folders; nullopt when none is found.
std::optional<std::string> find_nvdisasm();

struct SassMix {
  std::string function;           // lowered name
  uint32_t total_instructions = 0;
  uint32_t loop_instructions = 0;  // 0 when the function has no loop
  // Counts in the main loop: HMMA, LDSM, LDGSTS, LOP3, int_addr (IMAD IADD3 LEA SHF ISETP IMNMX SEL MOV PRMT
  // I2F/F2I...), LDG, LDS, STS, STG, FFMA, HFMA2, other.
  std::map<std::string, uint32_t> loop_mix;
};

// `cubin` disassembled by `nvdisasm -c` (code sections only); throws qt::Error when nvdisasm fails.
std::string disassemble(const std::string& nvdisasm, const std::vector<uint8_t>& cubin);

// The mix of each function in nvdisasm's text.
std::vector<SassMix> sass_mix_of(const std::string& text);

// Disassembles `cubin` with `nvdisasm` and returns the mix of each function; throws qt::Error when
// nvdisasm fails.
std::vector<SassMix> sass_mix(const std::string& nvdisasm, const std::vector<uint8_t>& cubin);

// The class an opcode counts under in SassMix::loop_mix ("HMMA.16816.F32" -> "HMMA").
std::string sass_class(const std::string& opcode);

}  // namespace qt::compile
