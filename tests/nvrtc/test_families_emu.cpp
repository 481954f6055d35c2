// Every device family registered in kernels_src/, run on the CPU emulator (with its race, bounds, alignment,
// barrier and cp.async checks) against the family's CPU reference: each default point on every test shape it
// accepts, on two seeds, each the input seed and the emulator's scheduling seed (race detection must not
// depend on the latter). A new family is covered by registering it; `-c <family>` runs one family.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "device/emu/emu_device.h"
#include "device/plan/linear_reference.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/registry.h"

using qt::kernels::KernelFamily;

namespace {

// The frag-layout GEMMs (kernels_src/fraglinear/, the longest to emulate), the other frag-layout families, and
// the rest: three test cases, so that CTest runs the parts of the longest check side by side and none of them
// nears its timeout.
enum class Part { kFragGemms, kFragOthers, kOthers };
Part part_of(const KernelFamily& f) {
  if (f.source.rfind("fraglinear/", 0) != 0) return Part::kOthers;
  const std::string suffix = "_gemm";
  const bool gemm = f.name.size() > suffix.size() && f.name.compare(f.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return gemm ? Part::kFragGemms : Part::kFragOthers;
}

void verify_default_points(Part part) {
  for (const KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host() || part_of(*f) != part) continue;
    DYNAMIC_SECTION(f->name) {
      const auto start = std::chrono::steady_clock::now();
      const auto points = f->default_points();
      REQUIRE(!points.empty());
      REQUIRE(!f->test_shapes.empty());
      std::vector<std::unique_ptr<qt::emu::EmuDevice>> devices;
      std::vector<std::shared_ptr<qt::dev::Module>> modules;
      for (uint64_t seed : {1u, 2u}) {
        qt::emu::EmuOptions options;
        options.seed = seed;
        options.arch = std::max(options.arch, f->min_sm);  // the Hopper families need the sm_90a wrappers
        devices.push_back(std::make_unique<qt::emu::EmuDevice>(options));
        modules.push_back(qt::plan::load_family_module(*devices.back(), *f, points));  // compiled once, then cached
      }
      // The inputs and the CPU reference of each test shape and seed, made once for all points: they depend on
      // neither the point nor the device.
      std::map<std::pair<size_t, size_t>, std::pair<qt::kernels::HostBuffers, std::vector<qt::kernels::Expected>>> cases;
      auto case_of = [&](size_t shape, size_t device) -> const auto& {
        auto it = cases.find({shape, device});
        if (it == cases.end()) {
          const qt::kernels::Shape& s = f->test_shapes[shape];
          auto inputs = f->make_inputs(s, devices[device]->options().seed);
          auto expected = f->reference(s, inputs);
          it = cases.emplace(std::pair{shape, device}, std::pair{std::move(inputs), std::move(expected)}).first;
        }
        return it->second;
      };
      size_t verified = 0;
      for (const auto& point : points) {
        // A point whose shape constraint rejects every test shape would pass having verified nothing.
        size_t shapes_run = 0;
        for (size_t si = 0; si < f->test_shapes.size(); ++si) {
          const qt::kernels::Shape& shape = f->test_shapes[si];
          if (f->shape_constraint && !f->shape_constraint(point, shape).empty()) continue;
          for (size_t i = 0; i < devices.size(); ++i) {
            const uint64_t seed = devices[i]->options().seed;
            INFO(f->name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(shape) << " ("
                         << shape.label << "), seed " << seed);
            const auto& [inputs, expected] = case_of(si, i);
            const auto r = qt::plan::verify_point_with(devices[i].get(), *f, point, shape, inputs, expected, modules[i]);
            CHECK(r.message == "");
          }
          ++shapes_run;
        }
        INFO(f->name << " " << qt::kernels::point_key(point) << ": the shape constraint rejects every test shape");
        REQUIRE(shapes_run > 0);
        verified += shapes_run;
      }
      std::cout << f->name << ": verified " << verified << " (point, shape) pairs over " << points.size()
                << " default points in " << std::fixed << std::setprecision(1)
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s"
                << std::endl;  // flushed: a CI log shows which family the time went to, even on a timeout
    }
  }
}

// `point` run once on `device` with `inputs`: it must be a valid point for `shape` and give the family's CPU
// reference; returns its output buffer `out`, for comparisons between points.
std::vector<uint8_t> run_verified(qt::emu::EmuDevice& device, const KernelFamily& f, const qt::kernels::Point& point,
                                  const qt::kernels::Shape& shape, const qt::kernels::HostBuffers& inputs,
                                  const std::string& out) {
  INFO(f.name << " " << qt::kernels::point_key(point));
  REQUIRE(f.point_constraint(point) == "");
  REQUIRE(f.shape_constraint(point, shape) == "");
  qt::plan::PlanRun run(&device, f, point, shape, inputs);
  run.run();
  CHECK(qt::plan::compare_outputs(run, f, point, shape, f.reference(shape, inputs)) == "");
  return run.output(out);
}

}  // namespace

TEST_CASE("every frag-layout GEMM's default points match its CPU reference on the emulator, no bug reported") {
  verify_default_points(Part::kFragGemms);
}

TEST_CASE("every other frag-layout family's default points match its CPU reference on the emulator, no bug reported") {
  verify_default_points(Part::kFragOthers);
}

TEST_CASE("every other device family's default points match its CPU reference on the emulator, no bug reported") {
  verify_default_points(Part::kOthers);
}

TEST_CASE("every linear family's reference computed on a device gives the CPU's sums, on its smallest test shape") {
  // What a tuner on a GPU trusts for large shapes (device/plan/linear_reference.h): the same kernel source,
  // here on the emulator, against cpu_linear_sums. Checks off: only the sums are in question here, and the
  // kernel's own bug checks run with every family above.
  size_t families = 0;
  for (const KernelFamily* f : qt::kernels::all_families()) {
    if (f->on_host() || !f->linear_operands) continue;
    qt::emu::EmuOptions options;
    options.checks = false;
    options.arch = std::max(options.arch, f->min_sm);
    qt::emu::EmuDevice device(options);
    REQUIRE(f->linear_expected);
    const auto smallest = std::min_element(f->test_shapes.begin(), f->test_shapes.end(), [](const auto& a, const auto& b) {
      return a["M"] * a["N"] * a["K"] < b["M"] * b["N"] * b["K"];
    });
    REQUIRE(smallest != f->test_shapes.end());
    INFO(f->name << " on " << qt::kernels::shape_key(*smallest));
    CHECK(qt::plan::check_device_linear_sums(device, *f, *smallest) == "");
    ++families;
  }
  CHECK(families >= 8);  // the frag GEMV/GEMM of both bit widths, AWQ, Q8_0 and fp16 GEMV and GEMM
}

TEST_CASE("the stream-K wgmma GEMM is exact where block ranges start and end inside tiles and span several") {
  // 70 rows (3 blocks of 32) by 320 features (2 column blocks) by 192 of K (3 chunks): 18 units. 5 and 7
  // blocks give ranges of 3 or 4 units, and 2, 3 of them share a tile; 18 gives one unit each (every tile
  // shared by 3); 1 block does everything alone. The default points' test shapes have too few units for
  // the first cases, since the plan never runs more blocks than units. The family's space offers block counts
  // for real GPUs (the SM counts); these small ones are added to a copy of it.
  const qt::kernels::Shape shape{{"M", "N", "K", "G"}, {70, 320, 192, 64}, "stream-K ranges"};
  // The same tiles with 10 chunks of K (60 units): ranges of up to 12 chunks, so the x ring refills its stages
  // within a tile and a range's main loop starts where the last one left it.
  const qt::kernels::Shape long_k{{"M", "N", "K", "G"}, {70, 320, 640, 64}, "stream-K ranges, long K"};
  for (const char* name : {"awq_frag_wgmma_gemm", "int8gw_frag_wgmma_gemm", "q8_0_frag_wgmma_gemm"}) {
    KernelFamily f = qt::kernels::find_family(name);
    for (auto& param : f.params)
      if (param.name == "sk") param.values = {0, 1, 5, 7, 18};
    qt::emu::EmuOptions options;
    options.arch = 90;
    qt::emu::EmuDevice device(options);
    // Both k-step depths, one stage of x ahead and (on the long K) two: at kif = 2 a block's range ends, and the
    // next tile's main loop starts, with the last k-step's wgmmas still in flight until the loop's final wait.
    // And the weights through shared memory (pf = 0): its ring of chunks, one ahead of x's, refilled within a
    // range and picked up by the next range's main loop.
    const std::vector<std::tuple<qt::kernels::Shape, int64_t, int64_t, int64_t>> cases = {
        {shape, 1, 2, 2},  {shape, 2, 3, 2},  {long_k, 1, 3, 2}, {long_k, 2, 3, 2},
        {long_k, 2, 4, 2}, {shape, 1, 2, 0}, {long_k, 1, 3, 0}, {long_k, 2, 4, 0}};
    for (const auto& [at, kif, stages, pf] : cases)
      for (int64_t blocks : {1, 5, 7, 18}) {
        const qt::kernels::Point point = {{"bm", 32}, {"wg", 1},       {"stages", stages}, {"pf", pf},
                                          {"kif", kif}, {"split", 1}, {"cluster", 1},    {"sk", blocks}};
        INFO(name << " " << qt::kernels::point_key(point) << " " << at.label);
        REQUIRE(f.point_constraint(point) == "");
        REQUIRE(f.shape_constraint(point, at) == "");
        REQUIRE(f.plan(point, at).launches.front().grid.x == uint32_t(blocks));
        const auto inputs = f.make_inputs(at, 3);
        CHECK(qt::plan::verify_point_with(&device, f, point, at, inputs, f.reference(at, inputs)).message == "");
      }
  }
}

TEST_CASE("the Hopper GEMMs with their weights through shared memory match the CPU reference at every warpgroup count") {
  // pf = 0: each lane copies the words it unpacks into its own slots of a shared ring of whole K chunks. Which
  // words a lane takes depends on the bits and the warpgroups splitting a tile (4, 2 or 1 fragment pairs each),
  // so every warpgroup count of INT4 and INT8, on a K whose last chunk is short (the copies past it land in the
  // next tile or the padding, never read), with one and three stages of x ahead; and the grouped gate/up, which
  // keeps two matrices in the ring.
  qt::emu::EmuOptions options;
  options.arch = 90;
  qt::emu::EmuDevice device(options);
  size_t verified = 0;
  const qt::kernels::Shape dense{{"M", "N", "K", "G"}, {40, 320, 352, 32}, "K = 352: 5 chunks and a half"};
  for (const char* name : {"awq_frag_wgmma_gemm", "int8gw_frag_wgmma_gemm", "q8_0_frag_wgmma_gemm"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    const auto inputs = f.make_inputs(dense, 13);
    const auto expected = f.reference(dense, inputs);
    for (int64_t wg : {1, 2, 4})
      for (int64_t stages : {2, 4}) {
        const qt::kernels::Point point = {{"bm", 32},   {"wg", wg},     {"stages", stages}, {"pf", 0},
                                          {"kif", 1},   {"split", 1},   {"cluster", 1},     {"sk", 0}};
        INFO(name << " " << qt::kernels::point_key(point));
        REQUIRE(f.point_constraint(point) == "");
        CHECK(qt::plan::verify_point_with(&device, f, point, dense, inputs, expected).message == "");
        ++verified;
      }
  }
  const qt::kernels::Shape grouped{{"T", "E", "TOPK", "N", "K", "G"}, {24, 4, 2, 328, 320, 32}, "5 chunks"};
  for (const char* name : {"moe_gate_up.frag.awq_int4", "moe_gate_up.frag.q8_0", "moe_down.frag.int8_sym"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    const auto inputs = f.make_inputs(grouped, 17);
    const auto expected = f.reference(grouped, inputs);
    for (int64_t kif : {1, 2}) {
      const qt::kernels::Point point = {{"bm", 16}, {"wg", 1},   {"stages", 3},  {"pf", 0},
                                        {"kif", kif}, {"split", 1}, {"cluster", 1}};
      INFO(name << " " << qt::kernels::point_key(point));
      REQUIRE(f.point_constraint(point) == "");
      CHECK(qt::plan::verify_point_with(&device, f, point, grouped, inputs, expected).message == "");
      ++verified;
    }
  }
  // The fused gate/up's widest one-warpgroup tile (bm = 32, two accumulator sets of 16 rows a thread), which the
  // 8-bit types take (252-254 registers) and AWQ, with its zeros beside them, is refused (it spills).
  const qt::kernels::Point widest = {{"bm", 32}, {"wg", 1},   {"stages", 4},  {"pf", 0},
                                     {"kif", 1}, {"split", 1}, {"cluster", 1}};
  for (const char* name : {"moe_gate_up.frag.q8_0", "moe_gate_up.frag.int8_sym"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    const auto inputs = f.make_inputs(grouped, 19);
    INFO(name << " " << qt::kernels::point_key(widest));
    REQUIRE(f.point_constraint(widest) == "");
    CHECK(qt::plan::verify_point_with(&device, f, widest, grouped, inputs, f.reference(grouped, inputs)).message == "");
    ++verified;
  }
  CHECK_FALSE(qt::kernels::find_family("moe_gate_up.frag.awq_int4").point_constraint(widest).empty());
  CHECK(verified == 26);
}

TEST_CASE("a K split summed in distributed shared memory by a cluster gives the bits of the same split summed in a workspace") {
  // Both sum the 4 partial tiles of a 64-column-chunk split in split order in fp32; only where the sum happens
  // differs (the last block to arrive, through L2, against every block of the cluster, through its neighbours'
  // shared memory). M = 40 leaves a partial row block; N = 320 a partial column block; K = 512 two chunks a block.
  const qt::kernels::Shape shape{{"M", "N", "K", "G"}, {40, 320, 512, 128}, "cluster split"};
  for (const char* name : {"awq_frag_wgmma_gemm", "int8gw_frag_wgmma_gemm", "q8_0_frag_wgmma_gemm"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    qt::emu::EmuOptions options;
    options.arch = 90;
    qt::emu::EmuDevice device(options);
    const auto inputs = f.make_inputs(shape, 5);
    std::vector<std::vector<uint8_t>> outputs;
    for (int64_t cluster : {1, 4}) {
      const qt::kernels::Point point = {{"bm", 32}, {"wg", 1}, {"stages", 2}, {"pf", 2}, {"kif", 1},
                                        {"split", cluster == 1 ? 4 : 1}, {"cluster", cluster}, {"sk", 0}};
      INFO(name << " " << qt::kernels::point_key(point));
      const qt::kernels::Launch l = f.plan(point, shape).launches.front();
      CHECK(l.grid.z == 4);
      CHECK(l.cluster.z == uint32_t(cluster));
      outputs.push_back(run_verified(device, f, point, shape, inputs, "y"));
    }
    INFO(name);
    CHECK(outputs[0] == outputs[1]);
  }
}

TEST_CASE("every tile height and warpgroup count of the cluster split matches the CPU reference, no bug reported") {
  // The partial tile's layout and the share each block sums depend on bm and wg (the accumulator fragments each
  // warpgroup holds), the cluster size on how the rows are shared; stages and pf do not meet the reduction.
  // M = 70 leaves a partial row block, N = 320 a partial column block.
  const qt::kernels::Shape shape{{"M", "N", "K", "G"}, {70, 320, 512, 128}, "cluster split"};
  const KernelFamily& f = qt::kernels::find_family("awq_frag_wgmma_gemm");
  qt::emu::EmuOptions options;
  options.arch = 90;
  options.seed = 3;
  qt::emu::EmuDevice device(options);
  const auto inputs = f.make_inputs(shape, 7);
  const auto expected = f.reference(shape, inputs);
  size_t verified = 0;
  for (int64_t bm : {32, 64, 128})
    for (int64_t wg : {1, 2, 4})
      for (int64_t cluster : {2, 4}) {
        const qt::kernels::Point point = {{"bm", bm},    {"wg", wg},           {"stages", 2}, {"pf", 1}, {"kif", 1},
                                          {"split", 1}, {"cluster", cluster}, {"sk", 0}};
        if (!f.point_constraint(point).empty()) continue;  // too many accumulators for one warpgroup
        INFO(qt::kernels::point_key(point));
        CHECK(qt::plan::verify_point_with(&device, f, point, shape, inputs, expected).message == "");
        ++verified;
      }
  CHECK(verified == 16);
}

TEST_CASE("the grouped expert GEMMs' cluster split gives the bits of the split with its reduction launch") {
  // Gate+up with SwiGLU applied where the cluster's sums meet, and down: against the same split's fp32
  // workspace summed by the reduction launch (gate_up_reduce_kernel / splitk_reduce_kernel), in the same order.
  const qt::kernels::Shape shape{{"T", "E", "TOPK", "N", "K", "G"}, {24, 4, 2, 328, 512, 32}, "cluster split"};
  for (const char* name : {"moe_gate_up.frag.awq_int4", "moe_down.frag.awq_int4"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    const std::string out = std::string(name).find("gate_up") != std::string::npos ? "h" : "y";
    qt::emu::EmuOptions options;
    options.arch = 90;
    qt::emu::EmuDevice device(options);
    const auto inputs = f.make_inputs(shape, 11);
    std::vector<std::vector<uint8_t>> outputs;
    for (int64_t cluster : {1, 4}) {
      const qt::kernels::Point point = {{"bm", 16}, {"wg", 1}, {"stages", 2}, {"pf", 2}, {"kif", 1},
                                        {"split", cluster == 1 ? 4 : 1}, {"cluster", cluster}};
      INFO(name << " " << qt::kernels::point_key(point));
      CHECK(f.plan(point, shape).launches.size() == (cluster == 1 ? 3u : 2u));  // placement, GEMM[, reduction]
      outputs.push_back(run_verified(device, f, point, shape, inputs, out));
    }
    INFO(name);
    CHECK(outputs[0] == outputs[1]);
  }
}

TEST_CASE("the Ampere GEMM sharing its weights through shared memory matches the CPU reference at every warp arrangement") {
  // wm and wn decide which rows of x and which tile's codes, scales and zeros each warp reads from a stage, and
  // how a stage's copies fall to the threads (several code copies a thread, or none of the scale and zero
  // copies); mf the rows a warp holds. M = 70 leaves a partial row block, N = 200 a partial column block (tiles
  // past N computed and not stored). K = 192 in groups of 64 is 6 chunks of 32: a split of 2 gives ranges of 3
  // chunks, the second beginning inside a group, where its block must take the group's scales from its first
  // stage.
  const qt::kernels::Shape shape{{"M", "N", "K", "G"}, {70, 200, 192, 64}, "warp arrangements"};
  size_t verified = 0;
  for (const char* name : {"awq_frag_smem_gemm", "int8gw_frag_smem_gemm"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    qt::emu::EmuOptions options;
    options.seed = 7;
    qt::emu::EmuDevice device(options);
    const auto inputs = f.make_inputs(shape, 7);
    std::vector<qt::kernels::Point> points;
    for (const auto& [wm, wn] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {1, 4}, {1, 8}, {2, 2}, {2, 4}, {4, 2}})
      points.push_back({{"mf", 2}, {"wm", wm}, {"wn", wn}, {"bk", 64}, {"stages", 2}, {"split", 1}});
    points.push_back({{"mf", 4}, {"wm", 2}, {"wn", 4}, {"bk", 64}, {"stages", 3}, {"split", 1}});
    points.push_back({{"mf", 2}, {"wm", 2}, {"wn", 4}, {"bk", 32}, {"stages", 4}, {"split", 2}});
    for (const auto& point : points) {
      run_verified(device, f, point, shape, inputs, "y");
      ++verified;
    }
  }
  CHECK(verified == 16);
}

TEST_CASE("the stream GEMVs' shared ring runs across group boundaries: 8 deep at groups of 16 and 32, warps' ranges "
          "of uneven length, folded scales, SwiGLU and the fused neighbours") {
  // The register ring unrolls pf steps a group, so its pf must divide G / 16; the shared ring keeps one slot
  // counter across groups, so 8 steps stay in flight where a group holds 1 or 2 (GGUF's Q8_0 at 32). The groups'
  // scales and zeros change, and the folded partials restart, in the middle of a ring trip. 45 groups split 2 ways
  // give warps 6, 6, 6 and 5 groups (and 6, 6, 6, 4); 30 groups of 16 give 8, 8, 8 and 6 steps.
  const std::vector<qt::kernels::Shape> shapes = {
      {{"M", "N", "K", "G"}, {1, 128, 1440, 32}, "45 groups of 32, 2 steps each"},
      {{"M", "N", "K", "G"}, {5, 128, 480, 16}, "30 groups of 16, a group a step"}};
  qt::emu::EmuDevice device{qt::emu::EmuOptions{}};
  for (const char* name : {"awq_frag_stream_gemv", "q8_0_frag_stream_gemv", "int8gw_frag_gate_up_swiglu",
                           "awq_frag_norm_gemv", "q8_0_frag_residual_gemv"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    for (const qt::kernels::Shape& shape : shapes)
      for (int64_t split : {1, 2}) {
        qt::kernels::Point point = f.defaults.front();
        REQUIRE(point.at("ring") == 1);
        point["pf"] = 8, point["split"] = split;
        qt::kernels::Shape at = shape;
        if (f.op == "gate_up_swiglu.frag") at.values[1] /= 2;  // N is each projection's columns
        INFO(name << " " << qt::kernels::point_key(point) << " on " << qt::kernels::shape_key(at) << " (" << at.label << ")");
        REQUIRE(f.point_constraint(point) == "");
        REQUIRE(f.shape_constraint(point, at) == "");
        const auto inputs = f.make_inputs(at, 5);
        CHECK(qt::plan::verify_point_with(&device, f, point, at, inputs, f.reference(at, inputs)).message == "");
      }
  }
}

TEST_CASE("the tensor-core attention decode matches the CPU reference where warps take several slices a tile or none, "
          "at every split count, in both forms") {
  // The defaults give each warp one 16-token slice of a 64-token tile. Here: 2 warps over 128-token tiles (4 slices
  // each: the running max and sum carried across slices), 8 warps over 16-token tiles (7 warps never see a token and
  // must weigh nothing in the block's result), 3 stages; 1 split (the output written directly), 4 (a split past the
  // context's last tile writes a neutral partial) and 64. Heads 16 over 2 KV heads (8 rows of the A operand) at head
  // dim 64 (4 of the registers' 8 k-steps), context 600 in a cache of 640.
  const qt::kernels::Shape shape{{"M", "H", "KVH", "D", "C", "P"}, {1, 16, 2, 64, 640, 599}, "GQA 8, D=64, context 600"};
  for (const char* name : {"attention_decode", "attention_decode_rope"}) {
    const KernelFamily& f = qt::kernels::find_family(name);
    qt::emu::EmuDevice device(qt::emu::EmuOptions{});
    const auto inputs = f.make_inputs(shape, 3);
    for (const auto& [threads, tile, stages] : {std::tuple{64, 128, 2}, std::tuple{256, 16, 3}, std::tuple{128, 32, 3}})
      for (int64_t splits : {1, 4, 64}) {
        const qt::kernels::Point point = {
            {"threads", threads}, {"tile", tile}, {"stages", stages}, {"splits", splits}, {"mma", 1}};
        INFO(name << " " << qt::kernels::point_key(point));
        CHECK(f.kernels(point).front().find("attention_decode_mma_kernel") == 0);
        run_verified(device, f, point, shape, inputs, "out");
      }
  }
}
