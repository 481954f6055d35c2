// The AWQ family's CPU reference on hand-packed words: nibble order {0,4,1,5,2,6,3,7}, zero points, scales,
// and the GEMM on values small enough to check by hand; and the family's shape rules, among them the model's
// linear shapes with q, k and v concatenated.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels_src/awq/awq_family.h"
#include "kernels_src/awq/awq_reference.h"
#include "models/core/linear_shapes.h"

using namespace qt::kernels::awq;

namespace {

AwqData hand_data() {
  AwqData d;
  d.m = 1, d.n = 8, d.k = 2, d.group = 2;
  // Nibble i holds i, so logical element e (at nibble {0,4,1,5,2,6,3,7}[e]) is that nibble index.
  d.qweight = {0x76543210, 0x76543210};
  d.qzeros = {0x11111111};  // zero point 1 for every column
  d.scales.assign(8, qt::float_to_half_bits(0.5f));
  d.x = {qt::float_to_half_bits(1.0f), qt::float_to_half_bits(-2.0f)};
  return d;
}

}  // namespace

TEST_CASE("the AWQ reference unpacks nibbles in AWQ order and applies zero and scale") {
  const auto w = reference_dequant(hand_data());
  REQUIRE(w.size() == 16);
  const float expect[8] = {-0.5f, 1.5f, 0.0f, 2.0f, 0.5f, 2.5f, 1.0f, 3.0f};  // (q - 1) * 0.5
  for (int k = 0; k < 2; ++k)
    for (int n = 0; n < 8; ++n) CHECK(w[size_t(k * 8 + n)] == expect[n]);
}

TEST_CASE("the AWQ GEMM reference sums x * w over K") {
  const auto y = reference_gemm(hand_data());
  REQUIRE(y.size() == 8);
  const double expect[8] = {0.5, -1.5, 0.0, -2.0, -0.5, -2.5, -1.0, -3.0};  // (1 - 2) * w
  for (int n = 0; n < 8; ++n) CHECK(y[size_t(n)] == expect[n]);
}

TEST_CASE("generated AWQ problems are deterministic per seed and in range") {
  const AwqData a = make_awq_data(3, 64, 256, 64, 5), b = make_awq_data(3, 64, 256, 64, 5);
  const AwqData c = make_awq_data(3, 64, 256, 64, 6);
  CHECK(a.qweight == b.qweight);
  CHECK(a.x == b.x);
  CHECK(a.qweight != c.qweight);
  CHECK(a.qweight.size() == 256 * 8);
  CHECK(a.qzeros.size() == 4 * 8);
  CHECK(a.scales.size() == 4 * 64);
  for (uint16_t s : a.scales) {
    const float v = qt::half_bits_to_float(s);
    CHECK(v >= 0.0009f);
    CHECK(v <= 0.0101f);
  }
}

TEST_CASE("AWQ shape rules: N multiple of the tile, G multiple of bk, M <= 8 for the GEMV") {
  const auto& gemm = gemm_family();
  auto p = gemm.default_point();
  p["bn"] = 128, p["bk"] = 64;
  CHECK(gemm.shape_constraint(p, gemm.shape({5, 128, 256, 64})) == "");
  CHECK(gemm.shape_constraint(p, gemm.shape({5, 192, 256, 64})) != "");  // N % 128
  CHECK(gemm.shape_constraint(p, gemm.shape({5, 128, 256, 32})) != "");  // G % bk
  CHECK(gemm.shape_constraint(p, gemm.shape({5, 128, 250, 64})) != "");  // K % G
  // int32 kernel arguments: M*N = 2^31 and K = 2^31 are refused with a reason, 2^31 - 128 is not.
  CHECK(gemm.shape_constraint(p, gemm.shape({int64_t(1) << 24, 128, 256, 64})) != "");
  CHECK(gemm.shape_constraint(p, gemm.shape({5, 128, int64_t(1) << 31, 64})) != "");
  CHECK(gemm.shape_constraint(p, gemm.shape({(int64_t(1) << 24) - 1, 128, 256, 64})) == "");
  const auto& gemv = gemv_family();
  CHECK(gemv.shape_constraint(gemv.default_point(), gemm.shape({8, 64, 128, 32})) == "");
  CHECK(gemv.shape_constraint(gemv.default_point(), gemm.shape({9, 64, 128, 32})) != "");
  CHECK(gemm_smem_bytes(p) == 3 * (32 * 72 * 2 + 64 * 128 / 2 + 128 * 2 + 16 * 4) + 64 * 136 * 2);
}

TEST_CASE("Qwen3-8B projections become four AWQ shapes, and q, k, v concatenated a fifth at one row") {
  qt::ModelConfig c;
  c.dim = 4096, c.hidden_dim = 12288, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 128, c.group_size = 128;
  const auto shapes = awq_layer_shapes(c, 1);
  REQUIRE(shapes.size() == 5);
  CHECK(shapes[0]["N"] == 4096);
  CHECK(shapes[0]["K"] == 4096);
  CHECK(shapes[0].label == "wq+wo");
  CHECK(shapes[1]["N"] == 1024);
  CHECK(shapes[1].label == "wk+wv");
  CHECK(shapes[2]["N"] == 4096 + 2 * 1024);
  CHECK(shapes[2]["K"] == 4096);
  CHECK(shapes[2].label == "wq|wk|wv");
  CHECK(shapes[2].max_rows == 1);  // the runtime runs the concatenation at decode only
  CHECK(shapes[3]["N"] == 12288);
  CHECK(shapes[4]["K"] == 12288);
  CHECK(shapes[4].label == "w2");
}

TEST_CASE("q, k and v concatenate only where one type, one group and one K serve all three") {
  static const uint8_t bytes[1] = {};
  auto tensor = [](qt::WeightType t, int64_t n, int64_t k, int32_t g) {
    qt::QTensor x;
    x.type = t, x.rows = n, x.cols = k, x.group_size = g, x.data = bytes;
    return x;
  };
  const auto q = tensor(qt::WeightType::AWQ_INT4, 256, 128, 32), kv = tensor(qt::WeightType::AWQ_INT4, 64, 128, 32);
  CHECK(qt::qkv_concatenable(q, kv, kv));
  CHECK(!qt::qkv_concatenable(q, tensor(qt::WeightType::Q8_0, 64, 128, 32), kv));
  CHECK(!qt::qkv_concatenable(q, kv, tensor(qt::WeightType::AWQ_INT4, 64, 128, 64)));
  CHECK(!qt::qkv_concatenable(q, tensor(qt::WeightType::AWQ_INT4, 64, 256, 32), kv));
  CHECK(!qt::qkv_concatenable(q, kv, qt::QTensor{}));
}

TEST_CASE("output comparison: an infinite expected value is met only by the same infinity") {
  using qt::kernels::BufferSpec;
  const BufferSpec spec{"y", qt::kernels::DType::F32, 3, BufferSpec::Role::Output};
  qt::kernels::Expected want;
  want.buffer = "y";
  want.values = {1.0f, INFINITY, -INFINITY};
  want.abs_tol = 1e-3, want.rel_tol = 1e-3;
  auto bytes = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  CHECK(qt::kernels::compare_output(spec, bytes({1.0f, INFINITY, -INFINITY}), want) == "");
  CHECK(qt::kernels::compare_output(spec, bytes({1.0f, 5.0f, -INFINITY}), want) != "");
  CHECK(qt::kernels::compare_output(spec, bytes({1.0f, -INFINITY, -INFINITY}), want) != "");
  CHECK(qt::kernels::compare_output(spec, bytes({1.0005f, INFINITY, -INFINITY}), want) == "");
}
