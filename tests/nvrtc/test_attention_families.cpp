// What the generic family tests do not prove for qk_norm_rope_kv, attention_decode and attention_prefill:
// their CPU references against independent formulas, that the kernels take pos0 from the device buffer (so a
// captured decode step replays at any position), and that bad shapes are refused with a reason.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "device/emu/emu_device.h"
#include "device/plan/run_plan.h"
#include "kernels_src/attention/attention_reference.h"
#include "kernels_src/registry/registry.h"
#include "kernels_src/rope_kv/rope_kv_reference.h"

using qt::kernels::KernelFamily;
using qt::kernels::Shape;

namespace {

std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> h;
  for (float x : v) h.push_back(qt::float_to_half_bits(x));
  return h;
}

// A head of `d` values with a spread of magnitudes, exactly representable in fp16.
std::vector<float> head_values(int64_t d, float shift) {
  std::vector<float> v;
  for (int64_t i = 0; i < d; ++i) v.push_back(qt::round_to_half(std::sin(0.7f * float(i) + shift) * 2.0f));
  return v;
}

}  // namespace

TEST_CASE("qk_norm_rope_kv reference equals transformers' rotate_half formula and keeps q.k relative") {
  using namespace qt::kernels::rope_kv;
  const int64_t d = 40, m = 6, pos0 = 9;
  RopeProblem p;
  p.m = m, p.heads = 1, p.kv_heads = 1, p.head_dim = d, p.capacity = pos0 + m, p.pos0 = pos0;
  p.eps = 1e-6f, p.theta = 1e4f;
  // Every token carries the same q and k head, so only the position differs between tokens.
  std::vector<float> q, k;
  for (int64_t t = 0; t < m; ++t) {
    const auto qh = head_values(d, 0.3f), kh = head_values(d, 1.1f);
    q.insert(q.end(), qh.begin(), qh.end());
    k.insert(k.end(), kh.begin(), kh.end());
  }
  const std::vector<float> ones(size_t(d), 1.0f);
  const std::vector<uint16_t> cache(size_t(p.capacity * d), 0);
  const RopeResult r = reference_qk_norm_rope_kv(p, to_half(q), to_half(k), to_half(k), ones, ones, cache, cache);

  // transformers: emb = cat(freqs, freqs); x * cos(emb) + rotate_half(x) * sin(emb), rotate_half(x) = cat(-x2, x1).
  const auto qh = head_values(d, 0.3f);
  double ss = 0;
  for (float x : qh) ss += double(x) * x;
  const double inv = 1.0 / std::sqrt(ss / double(d) + 1e-6);
  for (int64_t t = 0; t < m; ++t) {
    std::vector<double> emb(static_cast<size_t>(d)), rot(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) {
      emb[size_t(i)] = rope_angle(pos0 + t, i % (d / 2), d, p.theta);
      rot[size_t(i)] = i < d / 2 ? -qh[size_t(i + d / 2)] * inv : qh[size_t(i - d / 2)] * inv;
    }
    for (int64_t i = 0; i < d; ++i) {
      const double want = qh[size_t(i)] * inv * std::cos(emb[size_t(i)]) + rot[size_t(i)] * std::sin(emb[size_t(i)]);
      REQUIRE(r.q_out[size_t(t * d + i)] == Approx(want).margin(1e-12));
    }
  }
  // RoPE is a rotation by position: q(t) . k(s) depends on t - s only.
  auto dot = [&](int64_t t, int64_t s) {
    double acc = 0;
    for (int64_t i = 0; i < d; ++i) acc += r.q_out[size_t(t * d + i)] * r.k_cache[size_t((pos0 + s) * d + i)];
    return acc;
  };
  for (int64_t t = 1; t < m; ++t) CHECK(dot(t, t - 1) == Approx(dot(1, 0)).margin(1e-4));
  for (int64_t t = 0; t < m; ++t) CHECK(dot(t, t) == Approx(dot(0, 0)).margin(1e-4));
  // A norm weight of 1 leaves each rotated head with a mean square of 1 (up to eps).
  double ms = 0;
  for (int64_t i = 0; i < d; ++i) ms += r.q_out[size_t(3 * d + i)] * r.q_out[size_t(3 * d + i)];
  CHECK(ms / double(d) == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("attention reference: equal keys average the values, a dominant key selects its value") {
  using namespace qt::kernels::attention;
  const int64_t d = 8, len = 5;
  AttentionProblem p;
  p.m = 1, p.heads = 2, p.kv_heads = 1, p.head_dim = d, p.capacity = len + 3, p.pos0 = len - 1;
  std::vector<float> q(size_t(2 * d), 0.5f), k(size_t(p.capacity * d), 0.25f), v(size_t(p.capacity * d));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 7) - 3) * 0.125f;
  // Head 1's query is large along dimension 0, and only key 2 has a large component there.
  q[size_t(d)] = 64.0f;
  k[size_t(2 * d)] = 16.0f;
  // Rows past the context are never read: poison them.
  for (int64_t i = len * d; i < p.capacity * d; ++i) k[size_t(i)] = v[size_t(i)] = NAN;
  const AttentionResult r = reference_attention(p, to_half(q), to_half(k), to_half(v));
  for (int64_t e = 0; e < d; ++e) {
    // Head 0: keys 0, 1, 3, 4 score equally, key 2 higher by 0.5 * 15.75 / sqrt(8).
    const double big = std::exp(0.5 * 15.75 / std::sqrt(8.0));
    double want = 0;
    for (int64_t j = 0; j < len; ++j) want += (j == 2 ? big : 1.0) * v[size_t(j * d + e)];
    CHECK(r.out[size_t(e)] == Approx(want / (4.0 + big)).margin(1e-12));
    // Head 1: key 2 outscores the others by ~352, so its weight is 1 to double precision.
    CHECK(r.out[size_t(d + e)] == Approx(v[size_t(2 * d + e)]).margin(1e-12));
  }
}

TEST_CASE("the kernels read pos0 from the device buffer: a plan built for one position serves another") {
  qt::emu::EmuDevice dev;
  struct Case {
    const char* family;
    std::vector<int64_t> planned, run;  // {M, H, KVH, D, C, P}
  };
  const Case cases[] = {{"qk_norm_rope_kv", {3, 4, 2, 40, 48, 40}, {3, 4, 2, 40, 48, 7}},
                        {"attention_decode", {1, 4, 2, 40, 96, 90}, {1, 4, 2, 40, 96, 12}},
                        {"attention_prefill", {9, 4, 2, 40, 96, 3}, {9, 4, 2, 40, 96, 70}}};
  for (const Case& c : cases) {
    const KernelFamily& f = qt::kernels::find_family(c.family);
    const Shape planned = f.shape(c.planned, "planned"), run = f.shape(c.run, "run");
    const auto inputs = f.make_inputs(run, 3);
    const auto module = qt::plan::load_family_module(dev, f, f.default_points());
    for (const auto& point : f.default_points()) {
      INFO(c.family << " " << qt::kernels::point_key(point));
      if (!f.shape_constraint(point, planned).empty()) continue;
      // The plan's launches come from `planned` (P = planned pos0); the buffers hold `run`'s inputs, pos included.
      const auto r = qt::plan::verify_point_with(&dev, f, point, planned, inputs, f.reference(run, inputs), module);
      CHECK(r.message == "");
    }
  }
}

TEST_CASE("attention and rope shapes a kernel cannot run are refused with the reason") {
  const KernelFamily& decode = qt::kernels::find_family("attention_decode");
  const KernelFamily& prefill = qt::kernels::find_family("attention_prefill");
  const KernelFamily& rope = qt::kernels::find_family("qk_norm_rope_kv");
  const auto dp = decode.default_point(), pp = prefill.default_point(), rp = rope.default_point();
  auto why = [](const KernelFamily& f, const qt::kernels::Point& p, std::vector<int64_t> dims) {
    return f.shape_constraint(p, f.shape(std::move(dims)));
  };
  CHECK(why(decode, dp, {1, 4, 2, 40, 64, 10}) == "");
  CHECK_THAT(why(decode, dp, {2, 4, 2, 40, 64, 10}), Catch::Contains("M = 1"));
  CHECK_THAT(why(decode, dp, {1, 6, 4, 40, 64, 10}), Catch::Contains("multiple of KVH"));
  CHECK_THAT(why(decode, dp, {1, 4, 2, 36, 64, 10}), Catch::Contains("multiple of 8"));
  CHECK_THAT(why(decode, dp, {1, 4, 2, 40, 64, 64}), Catch::Contains("P + M <= C"));
  // The tensor-core kernel's registers hold k-steps of 16 up to D = 128, and its A operand 16 query heads.
  const auto mma = qt::kernels::parse_point(decode, "threads=128,tile=64,stages=2,splits=8,mma=1");
  CHECK(why(decode, mma, {1, 32, 8, 128, 64, 10}) == "");
  CHECK_THAT(why(decode, mma, {1, 4, 2, 40, 64, 10}), Catch::Contains("multiples of 16 up to 128, not 40"));
  CHECK_THAT(why(decode, mma, {1, 4, 2, 256, 64, 10}), Catch::Contains("not 256"));
  CHECK_THAT(why(decode, mma, {1, 34, 2, 32, 64, 10}), Catch::Contains("at most 16 query heads a KV head, not 17"));
  CHECK_THAT(why(prefill, pp, {8, 4, 2, 40, 64, 60}), Catch::Contains("P + M <= C"));
  CHECK_THAT(why(prefill, qt::kernels::parse_point(prefill, "bm=32,bn=64,warps=2,stages=3,dmax=64"),
                 {8, 4, 2, 128, 64, 0}),
             Catch::Contains("dmax=64"));
  CHECK_THAT(why(rope, rp, {1, 4, 2, 41, 64, 0}), Catch::Contains("even"));
  CHECK_THAT(why(rope, rp, {1, 4, 2, 36, 64, 0}), Catch::Contains("multiple of vec=4"));
  CHECK_THAT(why(rope, rp, {4, 4, 2, 40, 64, 61}), Catch::Contains("P + M <= C"));
}

TEST_CASE("untuned attention decode splits grow with the context until the grid fills a GPU") {
  const KernelFamily& f = qt::kernels::find_family("attention_decode");
  // The first default point of a decode shape at `tokens` of context (P = tokens - 1), Qwen3-8B heads unless given.
  auto splits = [&](int64_t tokens, int64_t kv_heads = 8) {
    const Shape s = f.shape({1, 4 * kv_heads, kv_heads, 128, tokens, tokens - 1}, "decode");
    const qt::kernels::Point p = f.default_points(s).at(0);
    CHECK(f.shape_constraint(p, s) == "");
    return p.at("splits");
  };
  // At least 16 tokens a split: a short context keeps few blocks.
  CHECK(splits(1) == 1);
  CHECK(splits(16) == 1);
  CHECK(splits(64) == 4);
  CHECK(splits(128) == 8);
  // From 1K tokens the 8 KV heads take 64 splits: 512 blocks, about four per SM of a 132-SM H200 (a fixed 8
  // splits gave 64 blocks at every context).
  CHECK(splits(1024) == 64);
  CHECK(splits(32768) == 64);
  // More KV heads need fewer splits for the same grid; fewer heads stop at the space's largest count.
  CHECK(splits(32768, 64) == 8);
  CHECK(splits(32768, 4) == 64);
  // The rule's count is among the points CI verifies, and every default is still offered after it.
  const Shape s = f.shape({1, 32, 8, 128, 4096, 4095}, "decode");
  CHECK(f.default_points(s).size() == f.default_points().size());
  bool verified = false;
  for (const auto& p : f.default_points()) verified = verified || p == f.default_points(s)[0];
  CHECK(verified);
}

TEST_CASE("attention decode leads with the tensor-core kernel and names its CUDA-core twin as the report's A/B, "
          "where the shape takes both") {
  const KernelFamily& f = qt::kernels::find_family("attention_decode");
  // Qwen3-8B heads at 4K tokens: the tensor cores first, the twin (same tile, threads, stages and splits) next.
  const Shape qwen = f.shape({1, 32, 8, 128, 4096, 4095}, "decode");
  const auto points = f.default_points(qwen);
  REQUIRE(points.size() >= 2);
  CHECK(points[0].at("mma") == 1);
  qt::kernels::Point twin = points[0];
  twin["mma"] = 0;
  CHECK(points[1] == twin);
  const auto ab = qt::kernels::one_parameter_neighbours(f, points[0], qwen);
  REQUIRE(ab.size() == 1);
  CHECK(ab[0].param == "mma");
  CHECK(ab[0].point == twin);
  // Head dim 40: the first default that runs is the twin, and no A/B is named against a point the shape refuses.
  const Shape d40 = f.shape({1, 4, 2, 40, 64, 63}, "decode");
  CHECK(qt::kernels::point_runs(f, points[0], d40) != "");
  const auto d40_points = f.default_points(d40);
  CHECK(qt::kernels::point_runs(f, d40_points[1], d40) == "");
  CHECK(d40_points[1].at("mma") == 0);
  CHECK(qt::kernels::one_parameter_neighbours(f, d40_points[1], d40).empty());
}
