#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/rng.h"
#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/moe/moe_family.h"
#include "kernels_src/moe/moe_family_util.h"
#include "kernels_src/moe/moe_reference.h"
#include "kernels_src/registry/family_util.h"
#include "kernels_src/registry/registry.h"

using namespace qt;
using namespace qt::kernels;

TEST_CASE("align reproduces vLLM's documented moe_align_block_size example", "[moe]") {
  const std::vector<int32_t> ids = {2, 3, 4, 1, 2, 4, 1, 3, 4, 1, 2, 3};  // topk_ids [[2,3,4],[1,2,4],[1,3,4],[1,2,3]]
  const moe::Alignment a = moe::align_blocks(ids.data(), 12, 5, 4);
  CHECK(a.padded == 16);
  CHECK(std::vector<int32_t>(a.sorted_ids.begin(), a.sorted_ids.begin() + 16) ==
        std::vector<int32_t>{3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 2, 5, 8, 12});
  CHECK(std::vector<int32_t>(a.block_expert.begin(), a.block_expert.begin() + 4) == std::vector<int32_t>{1, 2, 3, 4});
  for (size_t b = 4; b < a.block_expert.size(); ++b) CHECK(a.block_expert[b] == -1);
  CHECK(int64_t(a.sorted_ids.size()) == moe::align_capacity(12, 5, 4));
}

TEST_CASE("init routing: stable sort by expert, scatter index, counts, key-value pairs and the active range",
          "[moe]") {
  // 3 tokens x 2 experts: routed rows 0..5 go to experts 3, 1, 1, 0, 3, 3.
  const std::vector<int32_t> ids = {3, 1, 1, 0, 3, 3};
  const moe::InitRouting all = moe::init_routing(ids.data(), 3, 2, 4, 0, 4, moe::TokenCounts::Count);
  CHECK(all.active == 6);
  CHECK(all.sorted_row == std::vector<int32_t>{3, 1, 2, 0, 4, 5});  // ties keep row order
  for (int p = 0; p < 6; ++p) CHECK(all.expanded_row_idx[size_t(all.sorted_row[size_t(p)])] == p);
  CHECK(all.expert_tokens == std::vector<int64_t>{1, 2, 0, 3});  // expert 2 got no rows

  const moe::InitRouting kv = moe::init_routing(ids.data(), 3, 2, 4, 0, 4, moe::TokenCounts::KeyValue);
  CHECK(kv.expert_tokens == std::vector<int64_t>{0, 1, 1, 2, 3, 3});  // (expert, count) for experts with rows

  // Active range [1, 3): only the two rows of expert 1 take part; everything else is -1.
  const moe::InitRouting part = moe::init_routing(ids.data(), 3, 2, 4, 1, 3, moe::TokenCounts::Count);
  CHECK(part.active == 2);
  CHECK(part.sorted_row == std::vector<int32_t>{1, 2, -1, -1, -1, -1});
  CHECK(part.expanded_row_idx == std::vector<int32_t>{-1, 0, 1, -1, -1, -1});
  CHECK(part.expert_tokens == std::vector<int64_t>{2, 0});
  CHECK_THROWS(moe::init_routing(ids.data(), 3, 2, 4, 2, 5, moe::TokenCounts::Count));
}

TEST_CASE("init routing's int8 rows: scale max|x|/127, rounding half away from zero, all-zero rows", "[moe]") {
  // Token 0 has max |x| 1.27, so the scale is 0.01 and 0.005, -0.005, 0.015 sit exactly between codes.
  const std::vector<float> x = {1.27f, 0.005f, -0.005f, 0.015f, 0, 0, 0, 0};
  const std::vector<int32_t> ids = {0, 1};  // 2 tokens x 1 expert
  const moe::InitRouting r = moe::init_routing(ids.data(), 2, 1, 2, 0, 2, moe::TokenCounts::Count);
  std::vector<int8_t> q(8);
  std::vector<float> scale(2);
  moe::expand_rows_int8(r, 1, x.data(), 4, q.data(), scale.data());
  CHECK(scale[0] == Approx(0.01f));
  CHECK(q[0] == 127);
  // x / scale in fp32 lands within an ulp of .5; std::round keeps halves away from zero.
  CHECK(std::abs(q[1]) <= 1);
  CHECK(q[1] == -q[2]);
  CHECK(scale[1] == 0.0f);
  CHECK(std::vector<int8_t>(q.begin() + 4, q.end()) == std::vector<int8_t>{0, 0, 0, 0});
}

namespace {

// TensorRT-LLM's preprocessing of one [K][N] INT8 matrix, each documented step on its own.
std::vector<uint8_t> trtllm_steps(const std::vector<int8_t>& w, int64_t K, int64_t N) {
  static const int perm[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  // 1. Rows permuted in groups of 16: out_row[base + t] = in_row[base + perm[t]].
  std::vector<int8_t> permuted(w.size());
  for (int64_t r = 0; r < K; ++r)
    for (int64_t c = 0; c < N; ++c) permuted[size_t(r * N + c)] = w[size_t((r / 16 * 16 + perm[r % 16]) * N + c)];
  // 2. Transpose: row-major [K][N] -> [N][K].
  std::vector<int8_t> t(w.size());
  for (int64_t r = 0; r < K; ++r)
    for (int64_t c = 0; c < N; ++c) t[size_t(c * K + r)] = permuted[size_t(r * N + c)];
  // 3. Column interleave on 32-bit words: 4 int8 per word, 16 word-rows per 64-deep tile, 2 columns.
  const int64_t elts = 4, rows_words = K / elts, vpt = 64 / elts, il = 2;
  std::vector<int8_t> inter(w.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t vr = 0; vr < rows_words; ++vr) {
      const int64_t write_col = n / il, write_row = il * (vr - vr % vpt) + vpt * (n % il) + vr % vpt;
      for (int64_t b = 0; b < elts; ++b)
        inter[size_t((write_col * rows_words * il + write_row) * elts + b)] = t[size_t((n * rows_words + vr) * elts + b)];
    }
  // 4. +128 bias, then bytes 1 and 2 of each 32-bit word swapped.
  std::vector<uint8_t> out(w.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(int(inter[i]) + 128);
  for (size_t i = 0; i < out.size(); i += 4) std::swap(out[i + 1], out[i + 2]);
  return out;
}

}  // namespace

TEST_CASE("TensorRT-LLM INT8 layout is bit-exact against each documented preprocessing step", "[moe]") {
  Rng rng(5);
  for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {128, 96}, {4096, 64}, {256, 4096}}) {
    INFO("K=" << K << " N=" << N);
    for (int expert = 0; expert < 3; ++expert) {
      std::vector<int8_t> w(size_t(K * N));
      for (auto& v : w) v = int8_t(int(rng.below(256)) - 128);
      std::vector<uint8_t> stored(w.size());  // our files' [K][N] codes, q = w + 128
      for (size_t i = 0; i < w.size(); ++i) stored[i] = uint8_t(int(w[i]) + 128);
      CHECK(moe::trtllm_int8_layout(stored.data(), K, N) == trtllm_steps(w, K, N));
    }
  }
  const std::vector<uint8_t> q(64 * 48);
  CHECK_THROWS(moe::trtllm_int8_layout(q.data(), 64, 48));
}

namespace {

void verify_on_emu(const KernelFamily& f, const Shape& s, uint64_t seed) {
  emu::EmuOptions o;
  o.threads = 2;
  o.seed = seed;
  emu::EmuDevice device(o);
  // The point the runtime would choose without tuning: the first default that accepts the shape.
  Point p;
  for (const Point& d : f.default_points(s))
    if (!f.shape_constraint || f.shape_constraint(d, s).empty()) {
      p = d;
      break;
    }
  REQUIRE(!p.empty());
  const auto inputs = f.make_inputs(s, seed);
  INFO(f.name << " " << point_key(p) << " at " << shape_key(s) << ", input pattern seed " << seed);
  const auto r = plan::verify_point_with(&device, f, p, s, inputs, f.reference(s, inputs), nullptr);
  CHECK(r.message == "");
}

}  // namespace

TEST_CASE("routing on the device equals the CPU definitions at 1 and 4096 tokens, k = E, every row to one expert",
          "[moe]") {
  // Seeds 1, 2, 3 give the inputs' three routing patterns: skewed with an empty expert, all rows to expert 0,
  // and uniform with repeats.
  for (uint64_t seed : {1u, 2u, 3u}) {
    verify_on_emu(moe::gating_family(), Shape{{"M", "E", "K", "R"}, {4096, 128, 8, 1}, "4096 tokens"}, seed);
    verify_on_emu(moe::gating_family(), Shape{{"M", "E", "K", "R"}, {1, 128, 8, 0}, "1 token"}, seed);
    verify_on_emu(moe::gating_family(), Shape{{"M", "E", "K", "R"}, {9, 8, 8, 1}, "k = E"}, seed);
    verify_on_emu(moe::init_routing_family(),
                  Shape{{"M", "K", "E", "H", "S", "T", "Q", "V"}, {4096, 8, 128, 8, 0, 128, 0, 0}, "4096 tokens"}, seed);
    verify_on_emu(moe::init_routing_family(),
                  Shape{{"M", "K", "E", "H", "S", "T", "Q", "V"}, {1, 8, 128, 64, 16, 80, 1, 1}, "1 token, range"}, seed);
    verify_on_emu(moe::init_routing_family(),
                  Shape{{"M", "K", "E", "H", "S", "T", "Q", "V"}, {7, 6, 6, 32, 0, 6, 1, 0}, "k = E"}, seed);
    verify_on_emu(moe::align_family(), Shape{{"C", "E", "B"}, {4096 * 8, 128, 64}, "4096 tokens x 8"}, seed);
    verify_on_emu(moe::align_family(), Shape{{"C", "E", "B"}, {8, 128, 16}, "1 token x 8"}, seed);
  }
}

// The static model's count of a grouped GEMM's row blocks (each expert's rows padded to whole blocks of bm),
// against the same count over simulated routings: every token picks TOPK distinct experts uniformly. The
// count must follow the rows' spread: at a mean of exactly bm rows an expert, about half take a second block,
// which a count from the mean alone (one block each) missed.
TEST_CASE("the expected row blocks of a grouped GEMM equal the mean over simulated uniform routings", "[moe]") {
  struct Case {
    int64_t tokens, experts, topk, bm;
  };
  for (const Case c : {Case{1024, 128, 8, 64}, Case{4096, 128, 8, 64}, Case{512, 128, 8, 64}, Case{256, 128, 8, 16},
                       Case{16, 128, 8, 8}, Case{3, 4, 4, 2}}) {
    Rng rng(uint64_t(c.tokens * 131 + c.bm));
    constexpr int kTrials = 200;
    double blocks = 0;
    std::vector<int32_t> order(size_t(c.experts));
    for (int trial = 0; trial < kTrials; ++trial) {
      std::vector<int64_t> rows(size_t(c.experts), 0);
      for (int64_t t = 0; t < c.tokens; ++t) {
        std::iota(order.begin(), order.end(), 0);
        for (int64_t j = 0; j < c.topk; ++j) {  // a partial Fisher-Yates shuffle: TOPK distinct experts
          const size_t at = size_t(j) + size_t(rng.below(uint64_t(c.experts - j)));
          std::swap(order[size_t(j)], order[at]);
          ++rows[size_t(order[size_t(j)])];
        }
      }
      for (int64_t r : rows) blocks += double((r + c.bm - 1) / c.bm);
    }
    blocks /= kTrials;
    INFO("T=" << c.tokens << " E=" << c.experts << " TOPK=" << c.topk << " bm=" << c.bm << ": simulated " << blocks);
    CHECK(moe::expected_row_blocks(c.tokens, c.experts, c.topk, c.bm) == Approx(blocks).epsilon(0.02));
  }
  // At 1024 tokens a 64-row block is one per expert only on average: the spread makes it about 1.47.
  CHECK(moe::expected_row_blocks(1024, 128, 8, 64) / 128 == Approx(1.47).margin(0.03));
  CHECK(moe::expected_row_blocks(0, 128, 8, 64) == 0.0);
}

TEST_CASE("a grouped GEMM's untuned point follows the rows an expert sees: its decode tile to one row an expert, "
          "then 16-row tiles, 64-row ones from 32 rows",
          "[moe]") {
  for (const std::string name : {"moe_gate_up.q8_0", "moe_down.q8_0", "moe_gate_up.frag.q8_0", "moe_down.frag.awq_int4"}) {
    const KernelFamily& f = find_family(name);
    const std::vector<Point> listed = f.default_points();
    const int64_t decode_bm = listed.front().at("bm");
    // E = 128, TOPK = 8: T tokens give T / 16 routed rows an expert on average.
    for (const auto& [tokens, bm] : std::vector<std::pair<int64_t, int64_t>>{
             {1, decode_bm}, {16, decode_bm}, {17, 16}, {511, 16}, {512, 64}, {4096, 64}}) {
      const Shape s{{"T", "E", "TOPK", "N", "K", "G"}, {tokens, 128, 8, 1536, 2048, 128}, "30B-A3B gate/up"};
      INFO(name << " at " << tokens << " tokens");
      const std::vector<Point> ordered = f.default_points(s);
      CHECK(ordered.front().at("bm") == bm);
      CHECK(std::is_permutation(ordered.begin(), ordered.end(), listed.begin(), listed.end()));
    }
  }
}
