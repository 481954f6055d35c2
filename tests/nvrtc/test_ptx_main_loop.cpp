// The PTX main-loop count the static model's issue time reads: on hand-written PTX whose loops are known, and on
// the PTX NVRTC gives a real GEMM's loop.
#include <catch2/catch.hpp>

#include "device/jit/compile_service.h"
#include "device/jit/main_loop_range.h"
#include "device/jit/ptx_main_loop.h"
#include "kernels_src/registry/registry.h"

using namespace qt::compile;

namespace {

// Two entries. `looped`: an outer loop of 9 instructions (from $L__BB0_1 to its bra, the inner loop's 3 among
// them), an inline-asm scope and a forward branch inside it, directives, comments (trailing ones too) and a label
// that no branch returns to. `straight`: no backward branch.
const char* kPtx = R"(
.version 9.0
.target sm_80
.address_size 64

.visible .entry looped(
	.param .u64 looped_param_0,
	.param .u32 looped_param_1
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<10>;
	// a comment;
	ld.param.u32 	%r1, [looped_param_1];
	mov.u32 	%r2, 0;
$L__BB0_1:
	add.s32 	%r2, %r2, 1;
	mov.u32 	%r3, 0;
$L__BB0_2:
	add.s32 	%r3, %r3, 1;
	setp.lt.s32 	%p1, %r3, 4; // a trailing comment
	@%p1 bra 	$L__BB0_2;
	// begin inline asm
	{
	.reg .b32 t;
	mov.b32 t, %r3;
	}
	// end inline asm
	@!%p1 bra.uni 	$L__BB0_3;
$L__BB0_3: // a label's comment
	setp.lt.s32 	%p2, %r2, %r1;
	@%p2 bra 	$L__BB0_1;
	ret;
}

.visible .entry straight(
	.param .u64 straight_param_0
)
{
	.reg .b32 	%r<2>;
	mov.u32 	%r1, 0;
	bra.uni 	$L__BB1_1;
$L__BB1_1:
	ret;
}
)";

}  // namespace

TEST_CASE("the PTX main loop is the longest range closed by a backward branch, counted in instructions") {
  // add, mov, [add, setp, bra], the asm scope's mov, the forward bra, setp, bra: 9.
  CHECK(ptx_main_loop_instructions(kPtx, "looped") == 9);
  CHECK(ptx_main_loop_instructions(kPtx, "straight") == 0);
  CHECK(ptx_main_loop_instructions(kPtx, "absent") == 0);
  CHECK(ptx_main_loop_instructions(kPtx, "loop") == 0);  // a prefix of an entry's name is not that entry
}

// awq_gemm at its first default point: nvdisasm puts its SASS main loop at 199 instructions (NVRTC 13.0, sm_90a;
// `qtune profile --family awq_gemm --gpu sm90` with nvdisasm), the PTX's at 182. The bounds allow a compiler's
// drift, not a loop of another size: before its stage loaders looped a constant trip count the loop was 697
// (SASS) and 703 (PTX).
TEST_CASE("the main loop is the longest range a backward branch closes, and a branch to itself closes none") {
  using qt::compile::CodeBranch;
  using qt::compile::longest_backward_range;
  CHECK_FALSE(longest_backward_range({}).has_value());
  CHECK_FALSE(longest_backward_range({{10, 40}, {50, 50}}).has_value());  // forward, then SASS's trailing trap
  const auto nested = longest_backward_range({{30, 20}, {90, 10}, {60, 40}});
  REQUIRE(nested.has_value());
  CHECK(nested->first == 10);
  CHECK(nested->last == 90);
  const auto tie = longest_backward_range({{20, 10}, {40, 30}});  // equal lengths: the first
  REQUIRE(tie.has_value());
  CHECK(tie->first == 10);
}

TEST_CASE("a compiled GEMM's resources carry its PTX main loop, near the SASS one nvdisasm counts") {
  const qt::kernels::KernelFamily& f = qt::kernels::find_family("awq_gemm");
  CompileService service;
  const std::vector<PointResult> compiled = service.compile(f, {f.defaults.front()}, 90);
  REQUIRE(compiled.size() == 1);
  REQUIRE(compiled[0].ok());
  REQUIRE(compiled[0].kernels.size() == 1);
  const int n = compiled[0].kernels[0].resources.loop_instructions;
  CHECK(n >= 140);
  CHECK(n <= 260);
}
