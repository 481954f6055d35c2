// The AMX path of the Q8_0 GEMM. Its tile instructions have two implementations (amx_tiles.h): the scalar
// model, checked here against a plain reading of the SDM's definition, and the hardware. The GEMM runs through
// the model on any CPU with AVX-512 VNNI and must give the VNNI kernel's bits on every matrix shape of the
// golden models; the same check with the real tiles runs where the CPU has AMX and Linux grants it, and is
// reported skipped elsewhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/paths.h"
#include "models/formats/model_file.h"
#include "models/quant/quantized_tensor.h"
#include "runtime/cpu/amx_support.h"
#include "runtime/cpu/amx_tile_model.h"
#include "runtime/cpu/cpu_backend.h"
#include "tests/runtime/random_model.h"
#include "tests/skip.h"

using namespace qt;
using namespace qt::rt;

namespace {

TileConfig config(std::initializer_list<std::tuple<int, int, int>> tiles) {  // (tile, rows, colsb)
  TileConfig c;
  c.palette = 1;
  for (const auto& [t, rows, colsb] : tiles) c.rows[t] = uint8_t(rows), c.colsb[t] = uint16_t(colsb);
  return c;
}

// The matrices of the golden models that take the GEMM layout (Q8_0 and INT8_GW_SYM), one per distinct shape,
// and random Q8_0 ones for the groups the goldens lack: 64 (Qwen3's Q8_0 group: one whole-row product), 96
// and 128 (two products per group).
struct GemmMatrices {
  std::vector<std::unique_ptr<ModelFile>> files;
  std::vector<std::unique_ptr<quant::QuantizedTensor>> made;
  std::vector<QTensor> matrices;
};

GemmMatrices gemm_matrices() {
  const std::string dir = qt::source_root() + "/tests/golden/";
  std::ifstream in(dir + "manifest.json");
  REQUIRE(in.good());
  GemmMatrices g;
  std::set<std::tuple<int, int64_t, int64_t, int64_t>> seen;
  auto add = [&](const QTensor& t) {
    if (repackable_q8(t) && seen.insert({int(t.type), t.rows, t.cols, t.group_size}).second) g.matrices.push_back(t);
  };
  const nlohmann::json manifest = nlohmann::json::parse(in);
  for (const auto& f : manifest["files"]) {
    g.files.push_back(ModelFile::open(dir + f["file"].get<std::string>()));
    const ModelWeights& w = g.files.back()->weights();
    add(w.embedding);
    add(w.classifier);
    for (const auto& l : w.layers) {
      for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) add(*t);
      for (const ExpertStack* s : {&l.expert_w1, &l.expert_w2, &l.expert_w3})
        if (!s->empty()) add(s->expert(0));
    }
  }
  std::mt19937_64 rng(2929);
  for (const auto& [rows, cols, group] :
       {std::tuple<int64_t, int64_t, int32_t>{37, 256, 64}, {16, 192, 96}, {40, 384, 128}}) {
    const std::vector<float> v = test::random_values(rng, size_t(rows * cols), 1.0f);
    g.made.push_back(std::make_unique<quant::QuantizedTensor>(
        quant::quantize_tensor(v.data(), rows, cols, WeightType::Q8_0, group)));
    add(g.made.back()->view());
  }
  return g;
}

// Tile products the AMX kernel runs for `tokens` tokens of one matrix: blocks of 16 tokens while 8 or more are
// left (fewer go to VNNI), each panel of 16 rows, and one product per row of A: the whole group when it fits in
// 64 bytes, else the largest multiple of 4 bytes that divides it and fits.
uint64_t expected_products(const QTensor& w, int64_t tokens) {
  uint64_t blocks = 0;
  for (int64_t t = 0; tokens - t >= 8; t += 16) ++blocks;
  int64_t depth = std::min<int64_t>(w.group_size, 64);
  while (w.group_size % depth != 0) depth -= 4;
  return uint64_t((w.rows + 15) / 16) * blocks * uint64_t(w.cols / depth);
}

// The GEMM of every golden shape on `tiles` against the VNNI kernel, bit for bit, for token counts that take
// the VNNI path only (1, 7), one partial tile block (8, 15), whole blocks (16, 32) and blocks with a VNNI rest
// (17, 45). Returns the products the model ran.
uint64_t check_against_vnni(TileUnit tiles) {
  const GemmMatrices g = gemm_matrices();
  REQUIRE(g.matrices.size() >= 12);
  std::mt19937_64 rng(29);
  CpuOptions vnni = test::cpu_options(false, 2, Isa::kAvx512Vnni), amx = vnni;
  vnni.tiles = TileUnit::kNone;
  amx.tiles = tiles;
  CpuBackend vb(vnni), ab(amx);
  uint64_t products = 0;
  for (const QTensor& w : g.matrices) {
    REQUIRE(vb.repack(w));
    REQUIRE(ab.repack(w));
    for (int64_t m : {1, 7, 8, 15, 16, 17, 32, 45}) {
      INFO(weight_type_name(w.type) << " " << w.rows << " x " << w.cols << " group " << w.group_size << ", " << m
                                    << " tokens, " << tile_unit_name(tiles));
      const std::vector<float> x = test::random_values(rng, size_t(m * w.cols), 3.0f);
      std::vector<float> yv(size_t(m * w.rows), -1.0f), ya(size_t(m * w.rows), -2.0f);
      vb.matmul(w, x.data(), m, yv.data());
      const uint64_t before = AmxTileModel::products_run();
      ab.matmul(w, x.data(), m, ya.data());
      if (tiles == TileUnit::kAmxModel) {
        CHECK(AmxTileModel::products_run() - before == expected_products(w, m));
        products += AmxTileModel::products_run() - before;
      }
      CHECK(std::memcmp(yv.data(), ya.data(), yv.size() * sizeof(float)) == 0);
    }
  }
  return products;
}

}  // namespace

TEST_CASE("the AMX tile model runs TDPBSUD as the SDM defines it (signed A, unsigned B, int32 wraparound)",
          "[runtime][kernels][amx]") {
  std::mt19937_64 rng(291);
  std::uniform_int_distribution<int> byte(0, 255);
  // (rows of C and A, bytes of a row of A = 4 x rows of B, int32 columns of C and B)
  for (const auto& [m, ka, n] :
       {std::tuple<int, int, int>{16, 64, 16}, {3, 12, 5}, {16, 4, 1}, {7, 36, 16}, {1, 64, 2}}) {
    INFO("C " << m << " x " << n << " dwords, A " << m << " x " << ka << " bytes");
    AmxTileModel tiles;
    tiles.configure(config({{0, m, 4 * n}, {3, m, ka}, {5, ka / 4, 4 * n}}));
    const int64_t a_stride = 80, b_stride = 4 * n + 8, c_stride = 4 * n + 12;  // rows not packed together
    std::vector<uint8_t> a(size_t(m * a_stride)), b(size_t(ka / 4 * b_stride));
    std::vector<int32_t> c0(size_t(m * c_stride / 4));
    for (auto& v : a) v = uint8_t(byte(rng));
    for (auto& v : b) v = uint8_t(byte(rng));
    for (auto& v : c0) v = int32_t(rng());
    // Row 0 of A all 127 from near INT32_MAX: its first sum passes 2^31 and must wrap.
    std::memset(a.data(), 127, size_t(ka));
    c0[0] = INT32_MAX - 5;
    tiles.load<0>(c0.data(), c_stride);
    tiles.load<3>(a.data(), a_stride);
    tiles.load<5>(b.data(), b_stride);
    tiles.dpbsud<0, 3, 5>();
    std::vector<int32_t> c(c0.size(), 0x5a5a5a5a);  // the bytes between rows must stay as they are
    tiles.store<0>(c.data(), c_stride);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < c_stride / 4; ++j) {
        INFO("row " << i << " dword " << j);
        if (j >= n) {
          CHECK(c[size_t(i * c_stride / 4 + j)] == 0x5a5a5a5a);
          continue;
        }
        int64_t sum = c0[size_t(i * c_stride / 4 + j)];
        for (int k = 0; k < ka; ++k)
          sum += int64_t(int8_t(a[size_t(i * a_stride + k)])) * int64_t(b[size_t(k / 4 * b_stride + 4 * j + k % 4)]);
        CHECK(c[size_t(i * c_stride / 4 + j)] == int32_t(uint32_t(uint64_t(sum))));
      }
  }
}

TEST_CASE("the AMX tile model faults where the hardware would", "[runtime][kernels][amx]") {
  AmxTileModel tiles;
  int32_t buf[16 * 16] = {};
  CHECK_THROWS_AS(tiles.load<0>(buf, 64), Error);  // no configuration yet (#UD)
  TileConfig bad = config({{0, 16, 64}});
  bad.palette = 2;
  CHECK_THROWS_AS(tiles.configure(bad), Error);
  bad = config({{0, 16, 64}});
  bad.reserved[3] = 1;
  CHECK_THROWS_AS(tiles.configure(bad), Error);
  CHECK_THROWS_AS(tiles.configure(config({{0, 17, 64}})), Error);
  CHECK_THROWS_AS(tiles.configure(config({{0, 16, 68}})), Error);
  CHECK_THROWS_AS(tiles.configure(config({{8, 16, 64}})), Error);  // palette 1 has tiles 0..7
  CHECK_FALSE(tiles.configured());
  tiles.configure(config({{0, 16, 64}, {1, 16, 64}, {2, 16, 64}, {3, 8, 64}, {4, 16, 32}}));
  REQUIRE(tiles.configured());
  CHECK(tiles.rows(3) == 8);
  CHECK(tiles.colsb(4) == 32);
  CHECK_NOTHROW(tiles.dpbsud<0, 1, 2>());
  CHECK_THROWS_AS((tiles.dpbsud<0, 0, 2>()), Error);  // one tile twice
  CHECK_THROWS_AS((tiles.dpbsud<0, 3, 2>()), Error);  // rows of A differ from rows of C
  CHECK_THROWS_AS((tiles.dpbsud<0, 4, 2>()), Error);  // 32 bytes of A need 8 rows of B, not 16
  CHECK_THROWS_AS(tiles.load<5>(buf, 64), Error);     // tile 5 was not configured
  tiles.release();
  CHECK_FALSE(tiles.configured());
  CHECK_THROWS_AS(tiles.store<0>(buf, 64), Error);
}

TEST_CASE("the AMX GEMM through the tile model gives the VNNI kernel's bits on every shape of the goldens",
          "[runtime][kernels][amx]") {
  if (!isa_supported(Isa::kAvx512Vnni))
    QTUNE_SKIP("the AMX kernel converts its sums with AVX-512, which this CPU lacks");
  CHECK(check_against_vnni(TileUnit::kAmxModel) > 0);
}

TEST_CASE("on AMX hardware the GEMM's int32 sums equal the VNNI path's: outputs bit for bit on every golden shape",
          "[runtime][kernels][amx]") {
  if (!amx_support().usable) QTUNE_SKIP("no AMX tiles here: " + amx_support().detail);
  check_against_vnni(TileUnit::kAmx);
}

TEST_CASE("the backend takes AMX tiles only where they are usable and names the unit it runs",
          "[runtime][kernels][amx]") {
  CpuBackend automatic(test::cpu_options(false, 1));
  INFO(automatic.name() << "; AMX: " << amx_support().detail);
  if (amx_support().usable && automatic.isa() == Isa::kAvx512Vnni) {
    CHECK(automatic.tiles() == TileUnit::kAmx);
    CHECK(automatic.name().find("+amx-int8") != std::string::npos);
  } else {
    CHECK(automatic.tiles() == TileUnit::kNone);
    CHECK(automatic.name().find("amx") == std::string::npos);
  }
  CpuOptions o = test::cpu_options(false, 1, Isa::kAvx2);
  o.tiles = TileUnit::kAmxModel;
  CHECK_THROWS_AS(CpuBackend(o), Error);  // the AMX kernel needs AVX-512
  o = test::cpu_options(false, 1);
  o.tiles = TileUnit::kAmx;
  if (!amx_support().usable) CHECK_THROWS_WITH(CpuBackend(o), Catch::Contains(amx_support().detail));
  if (isa_supported(Isa::kAvx512Vnni)) {
    o.tiles = TileUnit::kAmxModel;
    CHECK(CpuBackend(o).name() == "cpu-fast-avx512-vnni+amx-model-1t");
  }
  CHECK(CpuBackend(test::cpu_options(true, 1)).tiles() == TileUnit::kNone);  // the reference path has no GEMM
}
