// The fast path's own layouts against independent definitions: the Q8_0 GEMM over repacked panels, attention
// over an fp16 KV cache at depth (spans merged across threads), and a KV cache that grows with the tokens run.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "common/mapped_file.h"
#include "kernels_src/cpu_matvec/quantized_matvec.h"
#include "models/quant/quantized_tensor.h"
#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/q8_gemm_kernels.h"
#include "runtime/cpu/q8_repack.h"
#include "runtime/model/qwen3_model.h"
#include "tests/proc_smaps.h"
#include "tests/runtime/random_model.h"
#include "tests/skip.h"

using namespace qt;
using namespace qt::rt;

namespace {

std::vector<int32_t> prompt(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 37 + 11) % vocab;
  return t;
}

// Pages of [p, p + bytes) in the page cache (mincore over a mapping of the file).
int64_t cached_pages(const void* p, uint64_t bytes) {
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (::mincore(const_cast<void*>(p), bytes, in.data()) != 0) return -1;
  return std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; });
}

// What the GEMM computes, in double from the exact integer sums: for token i and row n, the sum over groups of
// scale(n, g) * x_scale * (sum of weight(n, c) * x[c] - offset(n, g) * the group's activation sum).
template <class Weight, class Offset, class Scale>
std::vector<double> exact_products(const QuantizedRows& xq, int64_t m, int64_t rows, int64_t cols, int64_t group,
                                   Weight weight, Offset offset, Scale scale) {
  const int64_t ng = cols / group;
  std::vector<double> out(size_t(m * rows));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < rows; ++n) {
      double acc = 0;
      for (int64_t g = 0; g < ng; ++g) {
        int64_t s = 0;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) s += int64_t(weight(n, c)) * xq.q[size_t(i * cols + c)];
        s -= int64_t(offset(n, g)) * xq.qsum[size_t(i * ng + g)];
        acc += double(s) * double(scale(n, g)) * xq.scale[size_t(i * ng + g)];
      }
      out[size_t(i * rows + n)] = acc;
    }
  return out;
}

}  // namespace

TEST_CASE("Q8_0 GEMM over repacked panels equals the exact integer sums of every row and token, for every ISA",
          "[runtime][kernels]") {
  std::mt19937_64 rng(21);
  // Rows that do not fill the last 16-row panel, groups of 32, 64 and 20 (a row not a multiple of 16 bytes),
  // token counts around the register tiles, and from 16 on the AVX2 kernel's int16 tiles of 3 tokens with 1 and 0
  // tokens left for the narrower ones.
  for (const auto& [rows, cols, group] :
       {std::tuple<int64_t, int64_t, int32_t>{37, 128, 32}, {48, 192, 64}, {5, 64, 32}, {9, 40, 20}}) {
    const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
    const auto wt = quant::quantize_tensor(wv.data(), rows, cols, WeightType::Q8_0, group);
    const QTensor w = wt.view();
    for (int64_t m : {1, 2, 3, 8, 13, 16, 19, 21}) {
      const std::vector<float> x = test::random_values(rng, size_t(m * cols), 2.0f);
      QuantizedRows xq;
      quantize_rows(x.data(), m, cols, group, xq);
      const int64_t ng = cols / group;
      const auto* q = static_cast<const int8_t*>(w.data);
      const std::vector<double> expect = exact_products(
          xq, m, rows, cols, group, [&](int64_t n, int64_t c) { return q[n * cols + c]; },
          [](int64_t, int64_t) { return 0; }, [&](int64_t n, int64_t g) { return w.scales_f32[n * ng + g]; });
      for (Isa isa : test::available_isas()) {
        INFO("isa " << isa_name(isa) << " rows " << rows << " cols " << cols << " group " << group << " tokens " << m);
        CpuBackend be(test::cpu_options(false, 2, isa));
        REQUIRE(be.repack(w));
        std::vector<float> y(size_t(m * rows), -1.0f);
        std::vector<float> one(static_cast<size_t>(rows));
        be.matmul(w, x.data(), m, y.data());
        double worst = 0;
        for (size_t j = 0; j < y.size(); ++j) worst = std::max(worst, std::fabs(y[j] - expect[j]) / (1.0 + std::fabs(expect[j])));
        CHECK(worst < 1e-5);
        // A token's result does not depend on how many tokens share its tile, nor on which tile takes it.
        for (int64_t i : {int64_t(0), m - 1}) {
          be.matmul(w, x.data() + i * cols, 1, one.data());
          CHECK(std::equal(one.begin(), one.end(), y.begin() + i * rows));
        }
      }
    }
  }
}

namespace {

// An AWQ tensor's integer weight and zero point at (n, c), read from its packed words (weights.h).
int32_t awq_q(const QTensor& w, int64_t n, int64_t c) {
  return int32_t(awq_nibble(uint32_t(static_cast<const int32_t*>(w.data)[c * (w.rows / 8) + n / 8]), n % 8));
}
int32_t awq_zero(const QTensor& w, int64_t n, int64_t g) {
  return int32_t(awq_nibble(uint32_t(w.qzeros[g * (w.rows / 8) + n / 8]), n % 8));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float u, float v) {
           return std::bit_cast<uint32_t>(u) == std::bit_cast<uint32_t>(v);
         });
}

}  // namespace

TEST_CASE("AWQ INT4 GEMM over U4 panels equals the exact integer sums less the zero points, the same bits on every ISA "
          "and on the AMX kernel's model",
          "[runtime][kernels]") {
  std::mt19937_64 rng(31);
  // Rows that leave the last panel 8 rows short (AVX2's second half empty) or full, AWQ's group of 128, 64 and 32
  // (unrolled) and 40 (its depth at run time), and token counts around decode's tiles (1, 2), the AVX2 prefill
  // tiles of 4, the AVX-512 ones of 8 and the AMX kernel's least block (8).
  for (const auto& [rows, cols, group] : {std::tuple<int64_t, int64_t, int32_t>{40, 256, 128}, {32, 192, 64},
                                          {8, 64, 32}, {24, 120, 40}}) {
    const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
    const auto wt = quant::quantize_tensor(wv.data(), rows, cols, WeightType::AWQ_INT4, group);
    const QTensor w = wt.view();
    REQUIRE(repackable_u4(w));
    for (int64_t m : {1, 2, 3, 5, 8, 13, 19}) {
      const std::vector<float> x = test::random_values(rng, size_t(m * cols), 2.0f);
      QuantizedRows xq;
      quantize_rows(x.data(), m, cols, group, xq);
      const std::vector<double> expect = exact_products(
          xq, m, rows, cols, group, [&](int64_t n, int64_t c) { return awq_q(w, n, c); },
          [&](int64_t n, int64_t g) { return awq_zero(w, n, g); },
          [&](int64_t n, int64_t g) { return half_bits_to_float(w.scales_f16[g * rows + n]); });
      std::vector<float> first;
      for (Isa isa : test::available_isas()) {
        INFO("isa " << isa_name(isa) << " rows " << rows << " cols " << cols << " group " << group << " tokens " << m);
        CpuBackend be(test::cpu_options(false, 2, isa));
        REQUIRE(be.repack(w));
        std::vector<float> y(size_t(m * rows), -1.0f);
        be.matmul(w, x.data(), m, y.data());
        double worst = 0;
        for (size_t j = 0; j < y.size(); ++j) worst = std::max(worst, std::fabs(y[j] - expect[j]) / (1.0 + std::fabs(expect[j])));
        CHECK(worst < 1e-5);
        // Every ISA takes the same float steps over the same exact sums.
        if (first.empty()) first = y;
        CHECK(same_bits(first, y));
        // A token's result does not depend on how many tokens share its tile.
        std::vector<float> one(static_cast<size_t>(rows));
        for (int64_t i : {int64_t(0), m - 1}) {
          be.matmul(w, x.data() + i * cols, 1, one.data());
          CHECK(std::equal(one.begin(), one.end(), y.begin() + i * rows));
        }
      }
      // The AMX kernel (through the scalar model of its instructions) takes 8 tokens or more on the unpacked nibbles.
      if (isa_supported(Isa::kAvx512Vnni)) {
        INFO("amx-model rows " << rows << " cols " << cols << " group " << group << " tokens " << m);
        CpuOptions o = test::cpu_options(false, 2, Isa::kAvx512Vnni);
        o.tiles = TileUnit::kAmxModel;
        CpuBackend be(o);
        REQUIRE(be.repack(w));
        std::vector<float> y(size_t(m * rows), -1.0f);
        be.matmul(w, x.data(), m, y.data());
        CHECK(same_bits(first, y));
      }
    }
  }
}

TEST_CASE("a U4 panel's rows dequantize to the AWQ tensor's values", "[runtime][kernels]") {
  std::mt19937_64 rng(37);
  const int64_t rows = 24, cols = 256, group = 128;
  const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
  const auto wt = quant::quantize_tensor(wv.data(), rows, cols, WeightType::AWQ_INT4, group);
  const QTensor w = wt.view();
  const RepackedSet set = repack_panels({w}, nullptr);
  const RepackedQ8& r = set.matrices.at(0);
  REQUIRE(r.format == PanelFormat::kU4);
  REQUIRE(r.panels == 2);
  std::vector<float> got(static_cast<size_t>(cols)), expect(static_cast<size_t>(cols));
  for (int64_t n = 0; n < rows; ++n) {
    r.dequantize_row(n, got.data());
    dequantize_row(w, n, expect.data());
    INFO("row " << n);
    CHECK(same_bits(got, expect));
  }
}

TEST_CASE("a run of panels gives every panel the bits it gets alone, for every ISA", "[runtime][kernels]") {
  // The AVX2 kernel widens the activations once a run (q8_gemm_kernels.h, panels); the outputs must not depend on
  // how the scheduler cut a matrix into runs. 7 panels, the last of 5 rows; tokens below, at and past the wide
  // tiles' 16, with 1 and 2 left past the tiles of 3.
  std::mt19937_64 rng(5);
  const int64_t rows = 101, cols = 256;
  for (int32_t group : {32, 64}) {
    const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
    const auto wt = quant::quantize_tensor(wv.data(), rows, cols, WeightType::Q8_0, group);
    const RepackedSet set = repack_panels({wt.view()}, nullptr);
    const RepackedQ8& r = set.matrices.at(0);
    REQUIRE(r.panels == 7);
    const int64_t ng = cols / group;
    for (int64_t m : {int64_t(3), int64_t(16), int64_t(17), int64_t(23)}) {
      const std::vector<float> x = test::random_values(rng, size_t(m * cols), 2.0f);
      QuantizedRows xq;
      quantize_rows(x.data(), m, cols, group, xq);
      for (Isa isa : test::available_isas()) {
        INFO("isa " << isa_name(isa) << " group " << group << " tokens " << m);
        const Q8GemmKernels& kr = q8_gemm_kernels_for(isa);
        std::vector<float> alone(size_t(m * rows), -1.0f), run(size_t(m * rows), -2.0f);
        for (int64_t p = 0; p < r.panels; ++p)
          kr.panel(r.panel(p), cols, group, xq.q.data(), cols, xq.scale.data(), xq.qsum.data(), ng, m,
                   alone.data() + p * kQ8PanelRows, rows, std::min(kQ8PanelRows, rows - p * kQ8PanelRows));
        // Runs of 1, 2 and 4 panels.
        for (const auto& [p0, p1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {3, 7}})
          run_panels(kr, r.panel(p0), p1 - p0, cols, group, xq.q.data(), cols, xq.scale.data(), xq.qsum.data(), ng,
                     m, run.data() + p0 * kQ8PanelRows, rows, rows - p0 * kQ8PanelRows);
        CHECK(same_bits(alone, run));
      }
    }
  }
}

TEST_CASE("every ISA's GEMM gives the same bits with the decode prefetch into L2, into L1 or none, on both formats",
          "[runtime][kernels]") {
  // The prefetch is a per-CPU choice (q8_gemm_kernels_for, qbench --choose-decode): which one a store picks must
  // not change a token. Groups whose depth is unrolled (32, 64, 128) and one taken at run time (96); 1 and 2
  // tokens (decode's tiles) and 3 (the next ones).
  std::mt19937_64 rng(29);
  const int64_t rows = 40;
  for (WeightType type : {WeightType::Q8_0, WeightType::AWQ_INT4})
    for (int32_t group : {32, 64, 96, 128}) {
      const int64_t cols = group * 4;
      const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
      const auto wt = quant::quantize_tensor(wv.data(), rows, cols, type, group);
      const RepackedSet set = repack_panels({wt.view()}, nullptr);
      const RepackedQ8& r = set.matrices.at(0);
      const int64_t ng = cols / group;
      for (int64_t m : {int64_t(1), int64_t(2), int64_t(3)}) {
        const std::vector<float> x = test::random_values(rng, size_t(m * cols), 2.0f);
        QuantizedRows xq;
        quantize_rows(x.data(), m, cols, group, xq);
        for (Isa isa : test::available_isas()) {
          INFO(weight_type_name(type) << " isa " << isa_name(isa) << " group " << group << " tokens " << m);
          const Q8GemmKernels& l2 = q8_gemm_kernels_for(isa, TileUnit::kNone, DecodePrefetch::kL2);
          std::vector<float> a(size_t(m * rows), -1.0f);
          run_panels(l2, r.format, r.panel(0), r.panels, cols, group, xq.q.data(), cols, xq.scale.data(),
                     xq.qsum.data(), ng, m, a.data(), rows, rows);
          for (DecodePrefetch p : {DecodePrefetch::kNone, DecodePrefetch::kL1}) {
            const Q8GemmKernels& other = q8_gemm_kernels_for(isa, TileUnit::kNone, p);
            // The scalar kernel has no prefetch to choose: every kind is its one table.
            CHECK(other.decode_prefetch == (isa == Isa::kScalar ? DecodePrefetch::kNone : p));
            CHECK((isa == Isa::kScalar) == (&other == &l2));
            std::vector<float> b(size_t(m * rows), -2.0f);
            run_panels(other, r.format, r.panel(0), r.panels, cols, group, xq.q.data(), cols, xq.scale.data(),
                       xq.qsum.data(), ng, m, b.data(), rows, rows);
            CHECK(same_bits(a, b));
          }
        }
      }
    }
}

TEST_CASE("embedding rows read from a repacked (tied) table equal the file's rows", "[runtime][kernels]") {
  std::mt19937_64 rng(24);
  const int64_t rows = 37, cols = 128;
  const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
  const auto wt = quant::quantize_tensor(wv.data(), rows, cols, WeightType::Q8_0, 32);
  const QTensor w = wt.view();
  CpuBackend be(test::cpu_options(false, 2));
  REQUIRE(be.repack(w));
  const std::vector<int32_t> tokens{0, 15, 16, 36, 7};
  std::vector<float> got(tokens.size() * size_t(cols));
  std::vector<float> expect(static_cast<size_t>(cols));
  be.embed(w, tokens.data(), int64_t(tokens.size()), CpuBackend::host(got.data()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    dequantize_row(w, tokens[i], expect.data());
    CHECK(std::equal(expect.begin(), expect.end(), got.begin() + long(i) * cols));
  }
}

TEST_CASE("the GEMM's activation quantizer of every ISA gives quantize_rows' numbers", "[runtime][kernels]") {
  std::mt19937_64 rng(23);
  for (int64_t group : {32, 64, 128}) {
    const int64_t k = group * 3;
    std::vector<float> x = test::random_values(rng, size_t(k), 3.0f);
    // Group 0 has amax 127 (scale 1): halves round to even; group 1 is all zero (scale 0).
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -3.5f, x[3] = 0.5f;
    std::fill(x.begin() + group, x.begin() + 2 * group, 0.0f);
    QuantizedRows expect;
    quantize_rows(x.data(), 1, k, group, expect);
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << " group " << group);
      std::vector<int8_t> q(static_cast<size_t>(k));
      std::vector<float> scale(size_t(k / group));
      std::vector<int32_t> qsum(size_t(k / group));
      q8_gemm_kernels_for(isa).quantize_row(x.data(), k, group, q.data(), scale.data(), qsum.data());
      CHECK(q == expect.q);
      CHECK(scale == expect.scale);
      CHECK(qsum == expect.qsum);
    }
  }
}

// Random fp16-exact keys, values and queries of one attention call, its double-precision reference output, and
// the largest difference a fast backend's output makes from it.
struct AttentionCase {
  int64_t n_heads, n_kv, hd, cap, pos0, m;
  std::vector<float> kc, vc, q, expect;
  AttentionCase(std::mt19937_64& rng, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t capacity,
                int64_t first, int64_t rows)
      : n_heads(heads), n_kv(kv_heads), hd(head_dim), cap(capacity), pos0(first), m(rows) {
    kc = test::random_values(rng, size_t(cap * n_kv * hd), 3.0f);
    vc = test::random_values(rng, size_t(cap * n_kv * hd), 1.0f);
    for (float& v : kc) v = round_to_half(v);
    for (float& v : vc) v = round_to_half(v);
    q = test::random_values(rng, size_t(m * n_heads * hd), 1.0f);
    expect.resize(q.size());
    CpuBackend ref(test::cpu_options(true, 1));
    ref.attention(q.data(), kc.data(), vc.data(), pos0, m, n_heads, n_kv, hd, expect.data());
  }
  double fast_error(const rt::CpuOptions& options, ActType cache_type) const {
    CpuBackend fast(options);
    auto kcache = fast.alloc_kv(kc.size()), vcache = fast.alloc_kv(vc.size());
    REQUIRE(kcache->view().type == cache_type);
    fast.upload(kc.data(), kc.size(), kcache->view());
    fast.upload(vc.data(), vc.size(), vcache->view());
    std::vector<float> got(q.size());
    fast.attention(CpuBackend::host(q.data()), kcache->view(), vcache->view(), cap, pos0, m, n_heads, n_kv, hd,
                   CpuBackend::host(got.data()));
    double worst = 0;
    for (size_t j = 0; j < got.size(); ++j) worst = std::max(worst, double(std::fabs(got[j] - expect[j])));
    return worst;
  }
};

TEST_CASE("attention over an fp16 KV cache at depth equals the double-precision reference on the same cached values",
          "[runtime][kernels]") {
  std::mt19937_64 rng(22);
  // 48 and 80: AVX-512 value passes of 3 blocks, and of 4 then 1; 56: AVX2 passes of 2 blocks then 1.
  for (const int64_t hd : {32, 48, 56, 64, 80}) {
    // 1500 cached positions, decode (1 row) and a short prefill (5 rows): with 4 threads and 2 kv heads a
    // decode step is split into spans of the context whose softmaxes are merged. A prompt from position 0,
    // whose rows see causal contexts of different lengths. And 70 rows at depth: prefill's tiles over the
    // widened cache, where the ISA has them.
    for (const auto& [pos0, m] : {std::pair<int64_t, int64_t>{1499, 1}, {1495, 5}, {0, 7}, {1430, 70}}) {
      const AttentionCase c(rng, 4, 2, hd, 1500, pos0, m);
      for (Isa isa : test::available_isas()) {
        INFO("isa " << isa_name(isa) << " rows " << m << " after " << pos0 << " head_dim " << hd);
        CHECK(c.fast_error(test::cpu_options(false, 4, isa), ActType::F16) < 2e-5);
      }
    }
  }
}

// The scores loop takes keys and queries in blocks; a score must not depend on its block (a prompt row's scores
// at prefill are the same numbers as at decode, and a span split at decode changes no key's score).
// Up to 7 queries a call: a pass takes kAttnQueries, so 5 to 7 are a full pass and a rest.
TEST_CASE("an attention score is the same bits whichever keys and queries share its pass, on every ISA",
          "[runtime][kernels]") {
  std::mt19937_64 rng(23);
  const int64_t d = 128, n = 23, stride = 3 * d, most = 7;  // 23 keys: blocks of four and a tail of three
  const std::vector<float> q = test::random_values(rng, size_t(most * d), 1.0f);
  const std::vector<float> k32 = test::random_values(rng, size_t(n * stride), 2.0f);
  std::vector<uint16_t> k16(k32.size());
  for (size_t i = 0; i < k32.size(); ++i) k16[i] = float_to_half_bits(k32[i]);
  const float scale = 0.0883883f;
  for (Isa isa : test::available_isas()) {
    const AttentionKernels& ak = attention_kernels_for(isa);
    for (const bool half : {true, false}) {
      for (int64_t nq = 1; nq <= most; ++nq) {
        INFO("isa " << isa_name(isa) << (half ? " fp16" : " fp32") << " keys, " << nq << " queries");
        std::vector<float> all(size_t(most * n), -1.0f), one(size_t(most * n), -2.0f);
        auto run = [&](const float* qp, int64_t queries, int64_t first, int64_t keys, float* s) {
          if (half) ak.scores(qp, d, queries, k16.data() + first * stride, stride, keys, d, scale, s + first, n);
          else ak.scores_f32(qp, d, queries, k32.data() + first * stride, stride, keys, d, scale, s + first, n);
        };
        run(q.data(), nq, 0, n, all.data());
        for (int64_t j = 0; j < nq; ++j)
          for (int64_t p = 0; p < n; ++p) run(q.data() + j * d, 1, p, 1, one.data() + j * n);
        for (int64_t j = 0; j < nq; ++j)
          for (int64_t p = 0; p < n; ++p) {
            INFO("query " << j << " key " << p);
            REQUIRE(std::bit_cast<uint32_t>(all[size_t(j * n + p)]) == std::bit_cast<uint32_t>(one[size_t(j * n + p)]));
          }
      }
    }
  }
}

// Each output element sums its values in key order whatever else shares the pass, so a call with 7 queries (a full
// pass of kAttnQueries and a rest) gives each query the bits it gets alone.
TEST_CASE("an attention output is the same bits whichever queries share its pass, on every ISA", "[runtime][kernels]") {
  std::mt19937_64 rng(25);
  const int64_t d = 128, n = 19, stride = 3 * d, most = 7;
  const std::vector<float> w = test::random_values(rng, size_t(most * n), 1.0f);
  const std::vector<float> v32 = test::random_values(rng, size_t(n * stride), 2.0f);
  std::vector<uint16_t> v16(v32.size());
  for (size_t i = 0; i < v32.size(); ++i) v16[i] = float_to_half_bits(v32[i]);
  const std::vector<float> start = test::random_values(rng, size_t(most * d), 1.0f);  // accumulate adds to out
  for (Isa isa : test::available_isas()) {
    const AttentionKernels& ak = attention_kernels_for(isa);
    for (const bool half : {true, false}) {
      for (int64_t nq = 1; nq <= most; ++nq) {
        INFO("isa " << isa_name(isa) << (half ? " fp16" : " fp32") << " values, " << nq << " queries");
        auto run = [&](const float* wp, int64_t queries, float* out) {
          if (half) ak.accumulate(wp, n, queries, v16.data(), stride, n, d, out, d);
          else ak.accumulate_f32(wp, n, queries, v32.data(), stride, n, d, out, d);
        };
        std::vector<float> all = start, one = start;
        run(w.data(), nq, all.data());
        for (int64_t j = 0; j < nq; ++j) run(w.data() + j * n, 1, one.data() + j * d);
        for (int64_t i = 0; i < most * d; ++i) {
          INFO("query " << i / d << " element " << i % d);
          REQUIRE(std::bit_cast<uint32_t>(all[size_t(i)]) == std::bit_cast<uint32_t>(one[size_t(i)]));
        }
      }
    }
  }
}

// Prefill widens a head's keys once into blocks of 16 (block_keys) and scores a block's keys in the lanes of one
// vector; the scores must stay the numbers the row loop gives on the cache, or prefill and decode would differ.
TEST_CASE("scores over keys blocked by 16 are the same bits as scores over the fp16 cache, on every ISA that has them",
          "[runtime][kernels]") {
  std::mt19937_64 rng(24);
  int tables = 0;
  for (Isa isa : test::available_isas()) {
    const AttentionKernels& ak = attention_kernels_for(isa);
    if (!ak.scores_blocked) continue;
    ++tables;
    for (const int64_t d : {int64_t(64), int64_t(128)}) {
      const int64_t n = 53, stride = 3 * d;  // three blocks of 16 keys and a last one of 5
      const std::vector<float> q = test::random_values(rng, size_t(7 * d), 1.0f);  // 7 queries: a pass and a rest
      const std::vector<float> k32 = test::random_values(rng, size_t(n * stride), 2.0f);
      std::vector<uint16_t> k16(k32.size());
      for (size_t i = 0; i < k32.size(); ++i) k16[i] = float_to_half_bits(k32[i]);
      std::vector<float> kt(size_t(blocked_keys_size(n, d)), -7.0f);
      ak.block_keys(k16.data(), stride, n, d, kt.data());
      std::vector<float> layout(kt.size(), -8.0f);  // the scalar table's: the layout as the header states it
      block_keys_scalar(k16.data(), stride, n, d, layout.data());
      REQUIRE(kt == layout);
      CHECK(kt[size_t(3 * kKeyBlock * d + 5)] == 0.0f);  // key 53, the padding's first, element 0
      CHECK(kt[size_t(2 * kKeyBlock * d + 7 * kKeyBlock + 3)] == half_bits_to_float(k16[size_t(35 * stride + 7)]));
      for (int64_t nq = 1; nq <= 7; ++nq) {
        INFO("isa " << isa_name(isa) << ", d " << d << ", " << nq << " queries");
        std::vector<float> rows(size_t(7 * n), -1.0f), blocked(size_t(7 * n + 16), -2.0f);
        ak.scores(q.data(), d, nq, k16.data(), stride, n, d, 0.125f, rows.data(), n);
        ak.scores_blocked(q.data(), d, nq, kt.data(), n, d, 0.125f, blocked.data(), n);
        for (int64_t j = 0; j < nq; ++j)
          for (int64_t p = 0; p < n; ++p) {
            INFO("query " << j << " key " << p);
            REQUIRE(std::bit_cast<uint32_t>(rows[size_t(j * n + p)]) == std::bit_cast<uint32_t>(blocked[size_t(j * n + p)]));
          }
        // The last block's five keys are stored, its eleven padding lanes are not.
        for (int64_t i = 0; i < 11; ++i) CHECK(blocked[size_t(nq * n + i)] == -2.0f);
      }
    }
  }
  if (tables == 0) QTUNE_SKIP("no ISA on this CPU has a blocked scores loop (AVX2 and AVX-512 have)");
}

TEST_CASE("prefill attention gives every prompt row the same bits as that row decoded alone, on every ISA and cache type",
          "[runtime][kernels]") {
  std::mt19937_64 rng(25);
  // 40 rows from position 0: prefill's tiles (16 rows or more) over keys copied into blocks; each row alone is a
  // decode step over its own causal context. Groups of 2 query heads a kv head (the 0.6B shape's) and of 8
  // (30B-A3B's); fp16 caches (dense models) and fp32 (MoE models).
  for (const auto& [n_heads, n_kv, hd] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 64}, {16, 2, 128}}) {
    const int64_t m = 40, kvd = n_kv * hd, qd = n_heads * hd;
    const std::vector<float> kc = test::random_values(rng, size_t(m * kvd), 3.0f), vc = test::random_values(rng, size_t(m * kvd), 1.0f);
    const std::vector<float> q = test::random_values(rng, size_t(m * qd), 1.0f);
    for (const ActType kv : {ActType::F16, ActType::F32})
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << (kv == ActType::F16 ? ", fp16" : ", fp32") << " cache, " << n_heads << " heads, "
                  << n_kv << " kv heads, head_dim " << hd);
      rt::CpuOptions options = test::cpu_options(false, 2, isa);
      options.kv_cache = kv;
      CpuBackend be(options);
      auto k16 = be.alloc_kv(size_t(m * kvd)), v16 = be.alloc_kv(size_t(m * kvd));
      REQUIRE(k16->view().type == kv);
      be.upload(kc.data(), kc.size(), k16->view());
      be.upload(vc.data(), vc.size(), v16->view());
      std::vector<float> all(size_t(m * qd)), one(static_cast<size_t>(qd));
      be.attention(CpuBackend::host(q.data()), k16->view(), v16->view(), m, 0, m, n_heads, n_kv, hd, CpuBackend::host(all.data()));
      for (int64_t r = 0; r < m; ++r) {
        be.attention(CpuBackend::host(q.data() + r * qd), k16->view(), v16->view(), m, r, 1, n_heads, n_kv, hd,
                     CpuBackend::host(one.data()));
        for (int64_t i = 0; i < qd; ++i) {
          INFO("row " << r << " element " << i);
          REQUIRE(std::bit_cast<uint32_t>(all[size_t(r * qd + i)]) == std::bit_cast<uint32_t>(one[size_t(i)]));
        }
      }
    }
  }
}

TEST_CASE("prefill attention at 8K positions, where a widened fp16 cache takes one kv head a pass, equals the "
          "double-precision reference", "[runtime][kernels]") {
  std::mt19937_64 rng(26);
  // At head_dim 128 a kv head's widened keys and values take 8 MB at 8240 positions, so the 16 MB budget holds one
  // head a pass: two passes here, each of three tiles (one thread). An fp32 cache copies only its keys (4 MB a
  // head): both heads in one pass.
  const AttentionCase c(rng, 4, 2, 128, 8240, 8200, 40);
  for (const ActType kv : {ActType::F16, ActType::F32})
    for (Isa isa : test::available_isas()) {
      INFO("isa " << isa_name(isa) << (kv == ActType::F16 ? ", fp16" : ", fp32") << " cache");
      rt::CpuOptions options = test::cpu_options(false, 1, isa);
      options.kv_cache = kv;
      CHECK(c.fast_error(options, kv) < 2e-5);
    }
}

TEST_CASE("the KV cache grows with the tokens run, not to the context, and keeps what it holds", "[runtime][model]") {
  test::RandomModelSpec s;
  s.config = test::small_config(false);
  s.config.max_seq_len = 40960;  // Qwen3's
  s.linear_type = s.embed_type = WeightType::Q8_0;
  auto m = test::make_random_model(s);
  const int vocab = int(s.config.vocab_size);
  const auto tokens = prompt(300, vocab);
  std::vector<std::pair<bool, Isa>> paths{{true, Isa::kScalar}};
  for (Isa isa : test::available_isas()) paths.emplace_back(false, isa);
  for (const auto& [reference, isa] : paths) {
    INFO((reference ? "reference" : "fast ") << (reference ? "" : isa_name(isa)));
    CpuBackend be(test::cpu_options(reference, 2, isa));
    // Context 0 is the model's maximum: none of it is allocated up front.
    Qwen3Model whole(m->weights, be, 0), grown(m->weights, be, 0);
    CHECK(whole.context() == 40960);
    CHECK(whole.kv_capacity() <= 256);
    const std::vector<float> all = whole.forward(tokens, LogitsRows::kAll);
    // 250 tokens, then one at a time: the cache grows while holding 256 tokens and must carry them over.
    grown.forward(tokens.data(), 250, LogitsRows::kNone);
    std::vector<float> last;
    for (size_t i = 250; i < tokens.size(); ++i) last = grown.forward(&tokens[i], 1, LogitsRows::kLast);
    CHECK(grown.kv_capacity() >= 300);
    CHECK(grown.kv_capacity() <= 600);
    float worst = 0;
    for (int v = 0; v < vocab; ++v) worst = std::max(worst, std::fabs(last[size_t(v)] - all[size_t(299 * vocab + v)]));
    CHECK(worst < 1e-4f);
  }
}

TEST_CASE("fp16 KV keeps the fast path's top token at depth on a dense model", "[runtime][model]") {
  test::RandomModelSpec s;
  s.config = test::small_config(false);
  s.linear_type = s.embed_type = WeightType::Q8_0;
  auto m = test::make_random_model(s);
  const int vocab = int(s.config.vocab_size);
  const auto tokens = prompt(480, vocab);
  CpuOptions f32 = test::cpu_options(false, 2);
  f32.kv_cache = ActType::F32;
  CpuBackend half_kv(test::cpu_options(false, 2)), full_kv(f32);
  Qwen3Model a(m->weights, half_kv, 0), b(m->weights, full_kv, 0);
  CHECK(half_kv.kv_type() == ActType::F16);
  CHECK(full_kv.kv_type() == ActType::F32);
  const std::vector<float> la = a.forward(tokens, LogitsRows::kAll), lb = b.forward(tokens, LogitsRows::kAll);
  int same = 0, positions = 0;
  float worst = 0, scale = 0;
  for (size_t i = 400; i < tokens.size(); ++i, ++positions) {  // depth 400..479
    const auto ra = la.begin() + long(i) * vocab, rb = lb.begin() + long(i) * vocab;
    same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
    for (int v = 0; v < vocab; ++v) {
      worst = std::max(worst, std::fabs(ra[v] - rb[v]));
      scale = std::max(scale, std::fabs(rb[v]));
    }
  }
  INFO("worst logit difference " << worst << " of logits up to " << scale << ", same top-1 " << same << "/" << positions);
  CHECK(same * 100 >= positions * 98);
  // The fast path's documented bound on random models (int8 activations, test_model.cpp): 3% of the range.
  CHECK(worst < 0.03f * scale);
}

TEST_CASE("the fast path keeps fp32 KV for MoE models unless told otherwise", "[runtime][model]") {
  test::RandomModelSpec s;
  s.config = test::small_config(true);
  s.linear_type = s.expert_type = s.embed_type = WeightType::Q8_0;
  auto m = test::make_random_model(s);
  CpuBackend auto_kv(test::cpu_options(false, 1));
  CpuOptions forced = test::cpu_options(false, 1);
  forced.kv_cache = ActType::F16;
  CpuBackend half_kv(forced);
  Qwen3Model a(m->weights, auto_kv, 64), b(m->weights, half_kv, 64);
  CHECK(auto_kv.kv_type() == ActType::F32);
  CHECK(half_kv.kv_type() == ActType::F16);
}

TEST_CASE("repacking a mapped Q8_0 or AWQ matrix leaves one copy in memory and the file in the page cache",
          "[runtime][kernels]") {
  std::mt19937_64 rng(5);
  const int64_t rows = 512, cols = 1024;
  for (const auto& [type, group] : {std::pair<WeightType, int32_t>{WeightType::Q8_0, 32}, {WeightType::AWQ_INT4, 128}}) {
    INFO(weight_type_name(type));
    const std::vector<float> wv = test::random_values(rng, size_t(rows * cols), 1.0f);
    const auto wt = quant::quantize_tensor(wv.data(), rows, cols, type, group);
    const QTensor src = wt.view();
    // The tensor's arrays as the file holds them, one after the other.
    const bool awq = type == WeightType::AWQ_INT4;
    const uint64_t ng = uint64_t(cols / group);
    const std::vector<std::pair<const void*, uint64_t>> arrays =
        awq ? std::vector<std::pair<const void*, uint64_t>>{{src.data, uint64_t(rows * cols / 2)},
                                                            {src.qzeros, ng * uint64_t(rows / 2)},
                                                            {src.scales_f16, ng * uint64_t(rows) * 2}}
            : std::vector<std::pair<const void*, uint64_t>>{{src.data, uint64_t(rows * cols)},
                                                            {src.scales_f32, ng * uint64_t(rows) * 4}};
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("qtune-repack-" + std::to_string(::getpid()) + ".bin")).string();
    {
      // Written back to disk before it is mapped, as a model file is: the kernel may drop clean pages.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      REQUIRE(fd >= 0);
      for (const auto& [p, bytes] : arrays) REQUIRE(::write(fd, p, bytes) == ssize_t(bytes));
      REQUIRE(::fdatasync(fd) == 0);
      ::close(fd);
    }
    MappedFile map(path);
    QTensor w = src;
    std::vector<const uint8_t*> at;
    for (uint64_t off = 0; const auto& [p, bytes] : arrays) at.push_back(map.data() + off), off += bytes;
    w.data = at[0];
    if (awq) {
      w.qzeros = reinterpret_cast<const int32_t*>(at[1]);
      w.scales_f16 = reinterpret_cast<const uint16_t*>(at[2]);
    } else {
      w.scales_f32 = reinterpret_cast<const float*>(at[1]);
    }
    const std::vector<float> x = test::random_values(rng, size_t(3 * cols), 2.0f);
    CpuBackend be(test::cpu_options(false, 1));
    std::vector<float> from_file(size_t(3 * rows)), from_panels(size_t(3 * rows));
    be.matmul(w, x.data(), 3, from_file.data());  // reads the whole file through the mapping
    CHECK(test::smaps_value(map.data(), "Rss") * 1024 >= int64_t(map.size()) - 4096);
    REQUIRE(be.repack(w));
    // Only the pages the tensor's arrays share with each other could stay: at most one at each seam.
    CHECK(test::smaps_value(map.data(), "Rss") * 1024 <= int64_t(arrays.size()) * 4096);
    {
      MappedFile again(path);
      CHECK(cached_pages(again.data(), again.size()) == int64_t((again.size() + 4095) / 4096));
    }
    be.matmul(w, x.data(), 3, from_panels.data());
    for (size_t i = 0; i < from_file.size(); ++i) REQUIRE(from_panels[i] == Approx(from_file[i]).margin(1e-4));
    std::filesystem::remove(path);
  }
}

TEST_CASE("every Q8_0 or AWQ expert takes the GEMM layout at load, and token by token gives the prompt's logits",
          "[runtime][model]") {
  for (WeightType type : {WeightType::Q8_0, WeightType::AWQ_INT4}) {
    INFO(weight_type_name(type));
    test::RandomModelSpec s;
    s.config = test::small_config(true);
    s.linear_type = s.expert_type = type;
    s.embed_type = WeightType::Q8_0;
    auto m = test::make_random_model(s);
    const ModelConfig& c = m->weights.config;
    CpuBackend by_token(test::cpu_options(false, 1)), by_prompt(test::cpu_options(false, 1));
    Qwen3Model decode(m->weights, by_token, 32), prefill(m->weights, by_prompt, 32);
    int64_t experts = 0, repacked = 0;
    for (const auto& l : m->weights.layers)
      for (const ExpertStack* st : {&l.expert_w1, &l.expert_w2, &l.expert_w3})
        for (int64_t e = 0; e < st->experts; ++e, ++experts) repacked += by_token.has_gemm_layout(st->expert(e));
    CHECK(experts == int64_t(c.n_layers) * 3 * c.num_experts);
    CHECK(repacked == experts);
    // One row per expert and call (decode), and 12 tokens x 3 experts over 8 (prefill): the same panels.
    const auto tokens = prompt(12, int(c.vocab_size));
    std::vector<float> stepwise;
    for (int32_t t : tokens) stepwise = decode.forward(&t, 1, LogitsRows::kLast);
    const std::vector<float> last = prefill.forward(tokens, LogitsRows::kLast);
    REQUIRE(stepwise.size() == last.size());
    for (size_t i = 0; i < last.size(); ++i) REQUIRE(stepwise[i] == Approx(last[i]).margin(1e-4));
  }
}
