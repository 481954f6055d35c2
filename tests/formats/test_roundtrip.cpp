// Every format and every moe3 expert type: floats go through the writer, come back through ModelFile,
// and must equal the quantization rules computed independently (test_support.h), bit for bit; the file
// size must equal the closed-form size of the format.
#include <catch2/catch.hpp>

#include <deque>

#include <cstring>
#include <map>
#include <string>

#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

namespace {

struct Found {
  const QTensor* matrix = nullptr;
  const std::vector<float>* vector = nullptr;
};

// Name -> view, built from ModelWeights with names spelled out here (not by the library's naming code).
// Expert views are made on demand from their stack; the maps below hand out pointers, so they live here.
const QTensor* kept_view(const QTensor& t) {
  static std::deque<QTensor> views;
  views.push_back(t);
  return &views.back();
}

std::map<std::string, Found> index_weights(const ModelWeights& w) {
  std::map<std::string, Found> m;
  m["model.embed_tokens.weight"].matrix = &w.embedding;
  m["lm_head.weight"].matrix = &w.classifier;
  m["model.norm.weight"].vector = &w.final_norm;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m[p + "input_layernorm.weight"].vector = &lw.attn_norm;
    m[p + "post_attention_layernorm.weight"].vector = &lw.ffn_norm;
    m[p + "self_attn.q_norm.weight"].vector = &lw.q_norm;
    m[p + "self_attn.k_norm.weight"].vector = &lw.k_norm;
    m[p + "self_attn.q_proj.weight"].matrix = &lw.wq;
    m[p + "self_attn.k_proj.weight"].matrix = &lw.wk;
    m[p + "self_attn.v_proj.weight"].matrix = &lw.wv;
    m[p + "self_attn.o_proj.weight"].matrix = &lw.wo;
    m[p + "mlp.gate_proj.weight"].matrix = &lw.w1;
    m[p + "mlp.down_proj.weight"].matrix = &lw.w2;
    m[p + "mlp.up_proj.weight"].matrix = &lw.w3;
    m[p + "mlp.gate.weight"].matrix = &lw.router;
    for (int64_t e = 0; e < lw.expert_w1.experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      m[x + "gate_proj.weight"].matrix = kept_view(lw.expert_w1.expert(e));
      m[x + "down_proj.weight"].matrix = kept_view(lw.expert_w2.expert(e));
      m[x + "up_proj.weight"].matrix = kept_view(lw.expert_w3.expert(e));
    }
  }
  return m;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Reopens `path` and checks each tensor the writer's plan named against the rules.
void check_values(const std::string& path, const WriterOptions& o) {
  auto writer_plan_holder = ModelWriter::create(path + ".plan", o);  // only for its plan; removed unfinished
  const std::vector<TensorSlot> plan = writer_plan_holder->plan();
  writer_plan_holder.reset();
  auto f = ModelFile::open(path);
  auto index = index_weights(f->weights());
  for (const TensorSlot& s : plan) {
    INFO(s.hf_name);
    auto it = index.find(s.hf_name);
    REQUIRE(it != index.end());
    const std::vector<float> expected = ref_dequant(tensor_values(s), s.rows, s.cols, s.type, s.group_size);
    if (it->second.vector) {
      REQUIRE(s.rows == 1);
      CHECK(bit_equal(*it->second.vector, expected));
    } else {
      const QTensor& t = *it->second.matrix;
      REQUIRE(t.type == s.type);
      REQUIRE(t.rows == s.rows);
      REQUIRE(t.cols == s.cols);
      CHECK(bit_equal(dequantize(t), expected));
      // The row and element entry points agree with the whole-tensor one.
      std::vector<float> row(static_cast<size_t>(t.cols));
      dequantize_row(t, t.rows - 1, row.data());
      CHECK(std::memcmp(row.data(), &expected[static_cast<size_t>((t.rows - 1) * t.cols)], row.size() * 4) == 0);
      CHECK(dequant_element(t, 0, t.cols - 1) == expected[static_cast<size_t>(t.cols - 1)]);
    }
  }
}

uint64_t q8_bytes(uint64_t elements, uint64_t g) { return elements + elements / g * 4; }

uint64_t ajc1_size(const ModelConfig& c, uint64_t g) {
  const uint64_t L = c.n_layers, d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), V = c.vocab_size;
  uint64_t s = 256 + 4 * (2 * L * d + d + 2 * L * c.head_dim);
  s += q8_bytes(V * d, g) + L * (q8_bytes(q * d, g) + 2 * q8_bytes(kv * d, g) + q8_bytes(d * q, g) + 3 * q8_bytes(h * d, g));
  if (!c.shared_classifier) s += q8_bytes(V * d, g);
  return s;
}

uint64_t expert_bytes(uint64_t x, WeightType t, uint64_t eg, uint64_t g) {
  switch (t) {
    case WeightType::Q8_0: return q8_bytes(x, g);
    case WeightType::INT8_GW_SYM: return x + x / eg * 2;
    case WeightType::INT8_GW_ASYM: return x + x / eg * 4;
    case WeightType::AWQ_INT4: return x / 2 + x / eg / 8 * 4 + x / eg * 2;
    default: return 0;
  }
}

uint64_t moe3_size(const ModelConfig& c, uint64_t g, WeightType et, uint64_t eg) {
  const uint64_t L = c.n_layers, d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), V = c.vocab_size,
                 E = c.num_experts;
  uint64_t s = 256 + 4 * (2 * L * d + d + 2 * L * c.head_dim) + q8_bytes(V * d, g);
  s += L * (q8_bytes(q * d, g) + 2 * q8_bytes(kv * d, g) + q8_bytes(d * q, g) + q8_bytes(E * d, g) +
            3 * E * expert_bytes(h * d, et, eg, g));
  if (!c.shared_classifier) s += q8_bytes(V * d, g);
  return s;
}

uint64_t awq_bytes(uint64_t n, uint64_t k, uint64_t g) { return k * n / 2 + k / g * n / 8 * 4 + k / g * n * 2; }

uint64_t ak48_size(const ModelConfig& c, uint64_t g) {
  const uint64_t L = c.n_layers, d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), V = c.vocab_size;
  uint64_t s = 256 + 2 * (2 * L * d + d) + 2 * V * d;
  s += L * (awq_bytes(q, d, g) + 2 * awq_bytes(kv, d, g) + awq_bytes(d, q, g) + 3 * awq_bytes(h, d, g));
  if (!c.shared_classifier) s += 2 * V * d;
  return s + 2 * 2 * L * c.head_dim;
}

}  // namespace

TEST_CASE("ajc1 round trip: Q8_0 values and fp32 norms match the qwen3.c rule, size matches the formula", "[formats]") {
  for (bool shared : {true, false}) {
    const auto dir = scratch_dir(std::string("rt_ajc1_") + (shared ? "tied" : "untied"));
    WriterOptions o;
    o.format = FileFormat::AJC1;
    o.config = tiny_dense();
    o.config.shared_classifier = shared;
    const std::string path = (dir / "m.bin").string();
    write_model(path, o);
    auto f = ModelFile::open(path);
    CHECK(f->format() == FileFormat::AJC1);
    CHECK(f->config().group_size == 64);
    CHECK(f->file_size() == ajc1_size(f->config(), 64));
    CHECK(std::filesystem::file_size(path) == f->file_size());
    check_values(path, o);
    if (shared) {
      CHECK(f->weights().classifier.data == f->weights().embedding.data);
    } else {
      CHECK(f->weights().classifier.data != f->weights().embedding.data);
    }
  }
}

TEST_CASE("ajc1 round trip with a halved group (dim 96 -> group 32) and explicit rope_theta / rms_norm_eps", "[formats]") {
  const auto dir = scratch_dir("rt_ajc1_g32");
  WriterOptions o;
  o.format = FileFormat::AJC1;
  o.config = tiny_dense();
  o.config.dim = 96;
  o.config.hidden_dim = 160;
  o.config.n_heads = 4;
  o.config.head_dim = 24;
  o.config.rope_theta = 5e6f;
  o.config.rms_norm_eps = 1e-5f;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  auto f = ModelFile::open(path);
  CHECK(f->config().group_size == 32);
  CHECK(f->config().rope_theta == 5e6f);
  CHECK(f->config().rms_norm_eps == 1e-5f);
  CHECK(f->file_size() == ajc1_size(f->config(), 32));
  check_values(path, o);
}

TEST_CASE("moe3 round trip for every expert type, size matches the formula", "[formats]") {
  const WeightType types[] = {WeightType::Q8_0, WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM,
                              WeightType::AWQ_INT4};
  for (WeightType et : types) {
    for (bool shared : {true, false}) {
      DYNAMIC_SECTION(weight_type_name(et) << (shared ? " tied" : " untied")) {
        const auto dir = scratch_dir(std::string("rt_moe3_") + weight_type_name(et) + (shared ? "_t" : "_u"));
        WriterOptions o;
        o.format = FileFormat::MOE3;
        o.config = tiny_moe();
        o.config.shared_classifier = shared;
        o.config.norm_topk_prob = shared;
        o.expert_type = et;
        o.expert_group_size = et == WeightType::Q8_0 ? 0 : 32;
        const std::string path = (dir / "m.bin").string();
        write_model(path, o);
        auto f = ModelFile::open(path);
        const ModelConfig& c = f->config();
        CHECK(c.is_moe());
        CHECK(c.num_experts == 4);
        CHECK(c.num_experts_per_tok == 2);
        CHECK(c.norm_topk_prob == shared);
        CHECK(c.group_size == 64);
        const uint64_t eg = et == WeightType::Q8_0 ? 64 : 32;
        CHECK(f->file_size() == moe3_size(c, 64, et, eg));
        const LayerWeights& l1 = f->weights().layers[1];
        REQUIRE(l1.expert_w2.experts == 4);
        CHECK(l1.expert_w2.expert(3).type == et);
        CHECK(l1.expert_w2.expert(3).group_size == static_cast<int32_t>(eg));
        CHECK(l1.router.rows == 4);
        CHECK(l1.router.cols == 64);
        check_values(path, o);
      }
    }
  }
}

TEST_CASE("ak48 round trip: AWQ RTN from floats, fp16 norms / embedding / lm_head, size matches the formula", "[formats]") {
  for (bool shared : {true, false}) {
    const auto dir = scratch_dir(std::string("rt_ak48_") + (shared ? "tied" : "untied"));
    WriterOptions o;
    o.format = FileFormat::AK48;
    o.config = tiny_dense();
    o.config.shared_classifier = shared;
    const std::string path = (dir / "m.bin").string();
    write_model(path, o);
    auto f = ModelFile::open(path);
    CHECK(f->format() == FileFormat::AK48);
    CHECK(f->config().group_size == 64);  // 128 halved until it divides dim 64
    CHECK(f->file_size() == ak48_size(f->config(), 64));
    CHECK(f->weights().embedding.type == WeightType::F16);
    CHECK(f->weights().classifier.type == WeightType::F16);
    CHECK(f->weights().layers[0].w2.type == WeightType::AWQ_INT4);
    check_values(path, o);
  }
}

TEST_CASE("ak48 AWQ pass-through writes packed tensors bit for bit", "[formats]") {
  const auto dir = scratch_dir("rt_ak48_passthrough");
  WriterOptions o;
  o.format = FileFormat::AK48;
  o.config = tiny_dense();
  o.config.group_size = 32;
  const std::string path = (dir / "m.bin").string();
  struct Packed { std::vector<int32_t> qw, qz; std::vector<uint16_t> sc; };
  std::map<std::string, Packed> supplied;
  {
    auto w = ModelWriter::create(path, o);
    for (const TensorSlot& s : w->plan()) {
      if (s.type != WeightType::AWQ_INT4) {
        const std::vector<float> v = tensor_values(s);
        w->write_float(s, v.data());
        continue;
      }
      const uint32_t seed = seed_of(s.hf_name);
      const size_t K = static_cast<size_t>(s.cols), N = static_cast<size_t>(s.rows), G = static_cast<size_t>(s.group_size);
      Packed p;
      std::mt19937 rng(seed);
      p.qw.resize(K * N / 8);
      p.qz.resize(K / G * N / 8);
      p.sc.resize(K / G * N);
      for (auto& x : p.qw) x = static_cast<int32_t>(rng());
      for (auto& x : p.qz) x = static_cast<int32_t>(rng());
      for (auto& x : p.sc) x = float_to_half_bits(0.001f + static_cast<float>(rng() % 1000) * 1e-5f);
      w->write_awq(s, p.qw.data(), p.qz.data(), p.sc.data());
      supplied[s.hf_name] = std::move(p);
    }
    w->finish();
  }
  auto f = ModelFile::open(path);
  const QTensor& t = f->weights().layers[1].wo;  // [dim][q_dim]: K = 192, N = 64
  const Packed& p = supplied.at("model.layers.1.self_attn.o_proj.weight");
  REQUIRE(t.group_size == 32);
  CHECK(std::memcmp(t.data, p.qw.data(), p.qw.size() * 4) == 0);
  CHECK(std::memcmp(t.qzeros, p.qz.data(), p.qz.size() * 4) == 0);
  CHECK(std::memcmp(t.scales_f16, p.sc.data(), p.sc.size() * 2) == 0);
  // Dequantization by hand from the supplied words, element (n = 13, k = 77).
  const int64_t n = 13, k = 77, words = t.rows / 8;
  const uint32_t qword = static_cast<uint32_t>(p.qw[static_cast<size_t>(k * words + n / 8)]);
  const uint32_t zword = static_cast<uint32_t>(p.qz[static_cast<size_t>(k / 32 * words + n / 8)]);
  const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  const int q = static_cast<int>((qword >> (4 * order[n % 8])) & 15u);
  const int z = static_cast<int>((zword >> (4 * order[n % 8])) & 15u);
  const float s = half_bits_to_float(p.sc[static_cast<size_t>(k / 32 * t.rows + n)]);
  CHECK(dequant_element(t, n, k) == static_cast<float>(q - z) * s);
}
