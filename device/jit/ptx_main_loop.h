#pragma once
// How many PTX instructions one trip of a kernel's main loop issues, read from the PTX NVRTC produced beside
// the CUBIN. The main loop is the longest range of instructions closed by a backward branch, as sass_mix.h
// defines it for SASS; labels, directives, braces and comments are not instructions.
//
// Why PTX: it comes with every compile, while SASS needs nvdisasm, which the toolkit's compiler packages lack.
// Checked against nvdisasm's SASS (NVRTC 13.0, sm_90a; `qtune profile` prints the SASS count): the SASS main loop
// was 0.92-1.02x the PTX one for the file-layout GEMMs (awq_gemm, q8_0_gemm, five points) and the frag GEMM (two
// points), and 1.12-1.33x for the grouped MoE GEMM (two points), whose divisions SASS expands.
//
// It is the loop's text, every path once: a trip that skips a branch issues fewer, and an inner loop whose trips
// depend on the thread (a block's copy loops) issues its body as often as it runs. So it is an estimate of the
// instructions a trip issues, not a count.
#include <string>

namespace qt::compile {

// The instructions of `entry`'s main loop in `ptx` (0 when the entry has no backward branch, or is absent).
int ptx_main_loop_instructions(const std::string& ptx, const std::string& entry);

}  // namespace qt::compile
