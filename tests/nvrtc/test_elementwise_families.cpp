// What the generic emulator tests of the element-wise and decode families cannot show: their references
// against hand-computed or independently built values (argmax's tie and NaN rules, RMSNorm's formula, the
// Q8_0 gate+up reference against models' dequantization), one embedding family per weight type, and shape
// errors that name the problem.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels_src/registry/family_util.h"
#include "kernels_src/registry/registry.h"
#include "models/core/weights.h"

using qt::kernels::Expected;
using qt::kernels::find_family;
using qt::kernels::HostBuffers;
using qt::kernels::KernelFamily;

namespace {

std::vector<uint16_t> halves(std::initializer_list<float> v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(qt::float_to_half_bits(f));
  return out;
}

const Expected& output(const std::vector<Expected>& e, const std::string& name) {
  for (const Expected& x : e)
    if (x.buffer == name) return x;
  FAIL("no expected output " << name);
  return e.front();
}

}  // namespace

TEST_CASE("argmax reference: ties go to the lowest index, NaN never wins, a row of NaN gives -1 (no token)") {
  const KernelFamily& f = find_family("argmax");
  const float nan = std::nanf(""), inf = INFINITY;
  const auto logits = halves({1, 3, nan, 3, 2,           // tie of 3 at 1 and 3
                              nan, nan, nan, nan, nan,   // no comparable value
                              -inf, nan, -inf, -inf, -2,  // -2 is the largest
                              nan, -inf, -inf, nan, -inf});  // only -inf: the first one
  const auto e = f.reference(f.shape({4, 5}), {{"logits", qt::kernels::bytes_of(logits)}});
  CHECK(output(e, "token").values == std::vector<float>{1, -1, 4, 1});
  CHECK(output(e, "token").abs_tol == 0);
}

TEST_CASE("rmsnorm reference: y = w * x / sqrt(mean(x^2) + eps), after x += r when R = 1") {
  const KernelFamily& f = find_family("rmsnorm");
  REQUIRE(f.scalar("eps").test_value == 1e-6);
  const std::vector<float> w = {1.0f, 2.0f, 0.5f, 1.0f};
  HostBuffers in{{"x", qt::kernels::bytes_of(halves({1, -1, 1, -1}))},
                 {"r", qt::kernels::bytes_of(halves({2, -2, 2, -2}))},
                 {"w", qt::kernels::bytes_of(w)}};
  // x + r = (3, -3, 3, -3): mean square 9, so y = w * (+-1) * 3 / sqrt(9 + 1e-6).
  const auto e = f.reference(f.shape({1, 4, 1}), in);
  CHECK(output(e, "x").values == std::vector<float>{3, -3, 3, -3});
  const double s = 3.0 / std::sqrt(9.0 + 1e-6);
  const auto& y = output(e, "y").values;
  for (size_t i = 0; i < 4; ++i) CHECK(y[i] == Approx(w[i] * s * (i % 2 ? -1 : 1)).epsilon(1e-7));
  // R = 0: x stays, y = w * (+-1) / sqrt(1 + 1e-6).
  in["r"].clear();
  const auto plain = f.reference(f.shape({1, 4, 0}), in);
  CHECK(output(plain, "x").values == std::vector<float>{1, -1, 1, -1});
  CHECK(output(plain, "y").values[1] == Approx(-2.0 / std::sqrt(1.0 + 1e-6)).epsilon(1e-7));
}

TEST_CASE("gate_up_swiglu.q8_0 reference is silu(x·Wg) * (x·Wu) over models' Q8_0 dequantization") {
  const KernelFamily& f = find_family("gate_up_swiglu.q8_0");
  const auto shape = f.shape({2, 3, 64, 32});
  const HostBuffers in = f.make_inputs(shape, 5);
  auto tensor = [&](const std::string& w) {
    qt::QTensor t;
    t.type = qt::WeightType::Q8_0;
    t.rows = 3, t.cols = 64, t.group_size = 32;
    t.data = in.at(w + "_q").data();
    t.scales_f32 = reinterpret_cast<const float*>(in.at(w + "_scales").data());
    return qt::dequantize(t);
  };
  const auto wg = tensor("gate"), wu = tensor("up");
  const auto x = qt::kernels::from_bytes<uint16_t>(in.at("x"));
  const auto expected = f.reference(shape, in);
  const auto& h = output(expected, "h");
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) {
      double g = 0, u = 0;
      for (int k = 0; k < 64; ++k) {
        const double xv = qt::half_bits_to_float(x[size_t(m * 64 + k)]);
        g += xv * wg[size_t(n * 64 + k)], u += xv * wu[size_t(n * 64 + k)];
      }
      CHECK(h.values[size_t(m * 3 + n)] == Approx(g / (1 + std::exp(-g)) * u).epsilon(1e-6).margin(1e-9));
    }
}

TEST_CASE("one embedding family per weight type, named by its short name, with G only when quantized") {
  for (int i = 0; i <= int(qt::WeightType::AWQ_INT4); ++i) {
    const auto type = qt::WeightType(i);
    const qt::WeightTraits& t = qt::weight_traits(type);
    const KernelFamily& f = find_family(std::string("embedding.") + t.short_name);
    CHECK(f.serves(type));
    CHECK(f.op == "embedding");
    CHECK(f.dims == (t.quantized ? std::vector<std::string>{"M", "N", "V", "G"} : std::vector<std::string>{"M", "N", "V"}));
    for (const qt::ArraySpec& a : t.array_specs()) CHECK_NOTHROW(f.plan(f.default_point(), f.probe_shape).buffer(qt::weight_array_name(a.array)));
  }
}

TEST_CASE("shapes the element-wise and decode families cannot run are rejected with the reason") {
  auto why = [](const std::string& family, std::vector<int64_t> dims) {
    const KernelFamily& f = find_family(family);
    return f.shape_constraint(f.default_point(), f.shape(std::move(dims)));
  };
  CHECK(why("rmsnorm", {1, 64, 2}) == "R must be 0 (plain) or 1 (residual add)");
  CHECK(why("rmsnorm", {1, 36, 0}) == "N must be a multiple of vec=8 (aligned rows)");
  CHECK(why("f16_gemv", {9, 64, 64, 64}) == "GEMV serves M <= 8");
  CHECK(why("f16_gemv", {1, 64, 64, 32}) == "G must equal K for fp16 weights (no groups)");
  CHECK(why("gate_up_swiglu.q8_0", {1, 64, 96, 64}) == "K must be a multiple of the group size G");
  CHECK(why("gate_up_swiglu.awq_int4", {1, 60, 128, 128}) == "N must be a multiple of 8 (packed words)");
  CHECK(why("embedding.q8_0", {1, 96, 64, 64}) == "the group size G must divide N");
  CHECK(why("embedding.awq_int4", {1, 128, 60, 64}) == "V must be a multiple of 8 (packed words)");
  CHECK(why("argmax", {1, 1001}) == "V must be a multiple of vec=8 (aligned rows)");
  CHECK(why("swiglu", {0, 8}) == "M and N must be positive");
}

TEST_CASE("a default point of each element-wise and decode family runs every shape the golden tiny models need") {
  // tests/golden/models: dense (96, 160, vocab 384, heads 4/2 of 40) and dense-tied (128, 192, vocab 320,
  // heads 6/2 of 32), with the groups their files use (dense: 32; dense-tied: Q8_0 64, AWQ 32).
  std::vector<qt::ModelConfig> configs;
  for (auto [dim, hidden, vocab, heads, kv, head_dim, group] :
       {std::array<int, 7>{96, 160, 384, 4, 2, 40, 32}, {128, 192, 320, 6, 2, 32, 64}, {128, 192, 320, 6, 2, 32, 32}}) {
    qt::ModelConfig c;
    c.dim = dim, c.hidden_dim = hidden, c.vocab_size = vocab, c.n_heads = heads, c.n_kv_heads = kv;
    c.head_dim = head_dim, c.n_layers = 2, c.max_seq_len = 128, c.group_size = group;
    configs.push_back(c);
  }
  for (const KernelFamily* f : qt::kernels::all_families()) {
    const bool mine = f->op == "rmsnorm" || f->op == "swiglu" || f->op == "argmax" || f->op == "embedding" ||
                      f->op == "gate_up_swiglu" || f->name == "f16_gemv";
    if (!mine) continue;
    for (const qt::ModelConfig& c : configs)
      for (const auto& shape : f->model_shapes(c, nullptr)) {
        bool runs = false;
        for (const auto& p : f->default_points()) runs = runs || f->shape_constraint(p, shape).empty();
        INFO(f->name << " on " << qt::kernels::shape_key(shape));
        CHECK(runs);
      }
  }
}

TEST_CASE("an untuned fp16 GEMV over several batch rows first tries a default whose block shares each weight across them") {
  // mt = 1 at M = 4 reads the lm_head's weights four times (1,100 us on the H200 against 287 us at M = 1).
  const KernelFamily& f = find_family("f16_gemv");
  for (int64_t m : {2, 4, 8}) {
    const auto first = f.default_points(f.shape({m, 4096, 151936, 4096})).front();
    INFO("M = " << m);
    CHECK(first.at("mt") >= m);
  }
  CHECK(f.default_points(f.shape({1, 4096, 151936, 4096})) == f.default_points());
}
