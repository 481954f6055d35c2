// Label `slow`: the frag layout families at the full Qwen3 sizes CI cuts down (their test shapes keep N small):
// the device repack of Qwen3-8B's matrices bit for bit against the CPU repack, and every default GEMV / GEMM
// point against the CPU reference on Qwen3-8B and Qwen3-30B-A3B expert shapes, on the emulator.
#include <catch2/catch.hpp>

#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/fraglinear/frag_family.h"

using qt::kernels::KernelFamily;
using qt::kernels::Shape;

namespace {

// (N, K): Qwen3-8B wq/wo, w1/w3, w2; Qwen3-30B-A3B expert w1/w3 and w2.
const std::vector<std::pair<int64_t, int64_t>> kQwen = {{4096, 4096}, {12288, 4096}, {4096, 12288}, {768, 2048},
                                                        {2048, 768}};

}  // namespace

TEST_CASE("the device frag repack of Qwen3-8B and Qwen3-30B-A3B matrices is bit-exact with the CPU repack") {
  qt::emu::EmuOptions o;
  o.checks = false;  // bounds and races are covered on the CI shapes; here only the bits at full size
  qt::emu::EmuDevice dev(o);
  for (const KernelFamily* f : {&qt::kernels::frag::awq_repack_family(), &qt::kernels::frag::int8_repack_family()})
    for (const auto& [n, k] : kQwen) {
      const Shape s = f->shape({n, k, 128}, "Qwen3");
      INFO(f->name << " " << qt::kernels::shape_key(s));
      CHECK(qt::plan::verify_point(&dev, *f, f->default_point(), s, 3).message == "");
    }
}

TEST_CASE("frag GEMV and GEMM default points match the CPU reference at Qwen3-8B and Qwen3-30B-A3B sizes") {
  qt::emu::EmuOptions o;
  o.checks = false;
  qt::emu::EmuDevice dev(o);
  for (const KernelFamily* f : {&qt::kernels::frag::awq_gemv_family(), &qt::kernels::frag::int8_gemv_family(),
                                &qt::kernels::frag::awq_gemm_family(), &qt::kernels::frag::int8_gemm_family()}) {
    const int64_t m = f->name.find("gemv") != std::string::npos ? 1 : 64;
    for (const auto& [n, k] : kQwen)
      for (const auto& point : f->default_points()) {
        const Shape s = f->shape({m, n, k, 128}, "Qwen3");
        if (!f->shape_constraint(point, s).empty()) continue;
        INFO(f->name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(s));
        CHECK(qt::plan::verify_point(&dev, *f, point, s, 5).message == "");
      }
  }
}
