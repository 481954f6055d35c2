// The on-disk facts of each format (models/FORMATS.md): magic bytes, field
// offsets, qwen3.c's group rule, tensor order, and byte identity with an encoder written here from the
// qwen3.c export description.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/formats/layout.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "models/quant/q8_0.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

namespace {

template <class T>
T field(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

bool all_zero(const std::vector<uint8_t>& b, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

std::vector<std::string> names_in_offset_order(const nlohmann::json& d) {
  std::vector<std::pair<uint64_t, std::string>> v;
  for (const auto& t : d["tensors"]) v.emplace_back(t["offset"].get<uint64_t>(), t["name"].get<std::string>());
  std::sort(v.begin(), v.end());
  std::vector<std::string> names;
  for (auto& [off, name] : v) names.push_back(name);
  return names;
}

// Every byte after the header belongs to exactly one array, with no gap and no overlap.
void check_tiles_body(const nlohmann::json& d) {
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  for (const auto& t : d["tensors"]) {
    for (const auto& p : t["parts"]) parts.emplace_back(p["offset"].get<uint64_t>(), p["bytes"].get<uint64_t>());
  }
  std::sort(parts.begin(), parts.end());
  uint64_t at = 256;
  for (auto& [off, bytes] : parts) {
    REQUIRE(off == at);
    at += bytes;
  }
  CHECK(at == d["file_size"].get<uint64_t>());
}

std::string L(int l, const std::string& rest) { return "model.layers." + std::to_string(l) + "." + rest; }

// qwen3.c export.py, re-expressed: serialize_fp32 / serialize_int8 in its order.
struct QwenExport {
  std::vector<uint8_t> out;
  void fp32(const std::vector<float>& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * 4);
  }
  void q80(const std::vector<float>& w, size_t group) {
    std::vector<int8_t> q(w.size());
    std::vector<float> s(w.size() / group);
    for (size_t g = 0; g < s.size(); ++g) {
      float wmax = 0;
      for (size_t i = 0; i < group; ++i) wmax = std::max(wmax, std::fabs(w[g * group + i]));
      const float scale = wmax / 127.0f;
      s[g] = scale;
      for (size_t i = 0; i < group; ++i) {
        q[g * group + i] = static_cast<int8_t>(scale == 0 ? 0 : std::nearbyint(w[g * group + i] / scale));
      }
    }
    const auto* p = reinterpret_cast<const uint8_t*>(q.data());
    out.insert(out.end(), p, p + q.size());
    fp32(s);
  }
};

std::vector<float> values_of(const std::string& name, int64_t rows, int64_t cols) {
  TensorSlot s;
  s.hf_name = name;
  s.rows = rows;
  s.cols = cols;
  return tensor_values(s);
}

}  // namespace

TEST_CASE("qwen3.c group rule: 64 halved while dim % group != 0", "[formats]") {
  CHECK(quant::q8_0_group_rule(1024) == 64);
  CHECK(quant::q8_0_group_rule(2560) == 64);
  CHECK(quant::q8_0_group_rule(96) == 32);
  CHECK(quant::q8_0_group_rule(80) == 16);
  CHECK(quant::q8_0_group_rule(100) == 4);
  CHECK(quant::q8_0_group_rule(7) == 1);
}

TEST_CASE("ajc1 header on disk: bytes 1cja, version 1, int32 fields at 8..44, zero padding for defaults", "[formats]") {
  const auto dir = scratch_dir("facts_ajc1_header");
  WriterOptions o;
  o.format = FileFormat::AJC1;
  o.config = tiny_dense();
  o.config.dim = 96;
  o.config.hidden_dim = 160;
  o.config.n_heads = 4;
  o.config.head_dim = 24;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  const std::vector<uint8_t> b = read_bytes(path);
  REQUIRE(b.size() > 256);
  CHECK(std::string(b.begin(), b.begin() + 4) == "1cja");
  CHECK(field<uint32_t>(b, 0) == 0x616A6331u);
  CHECK(field<int32_t>(b, 4) == 1);
  CHECK(field<int32_t>(b, 8) == 96);
  CHECK(field<int32_t>(b, 12) == 160);
  CHECK(field<int32_t>(b, 16) == 2);
  CHECK(field<int32_t>(b, 20) == 4);
  CHECK(field<int32_t>(b, 24) == 2);
  CHECK(field<int32_t>(b, 28) == 40);
  CHECK(field<int32_t>(b, 32) == 128);
  CHECK(field<int32_t>(b, 36) == 24);
  CHECK(field<int32_t>(b, 40) == 1);
  CHECK(field<int32_t>(b, 44) == 32);  // 64 halved once for dim 96
  CHECK(all_zero(b, 48, 256));         // theta 1e6 and eps 1e-6 are written as qwen3.c's zero padding
}

TEST_CASE("ajc1 body order: fp32 norms grouped, Q8_0 tensors grouped by type across layers, wcls last", "[formats]") {
  const auto dir = scratch_dir("facts_ajc1_order");
  WriterOptions o;
  o.format = FileFormat::AJC1;
  o.config = tiny_dense();
  o.config.shared_classifier = false;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  auto f = ModelFile::open(path);
  const nlohmann::json d = f->describe();
  std::vector<std::string> want;
  for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) {
    for (int l = 0; l < 2; ++l) want.push_back(L(l, n));
  }
  want.push_back("model.norm.weight");
  for (const char* n : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) {
    for (int l = 0; l < 2; ++l) want.push_back(L(l, n));
  }
  want.push_back("model.embed_tokens.weight");
  for (const char* n : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.down_proj.weight",
                        "mlp.up_proj.weight"}) {
    for (int l = 0; l < 2; ++l) want.push_back(L(l, n));
  }
  want.push_back("lm_head.weight");
  CHECK(names_in_offset_order(d) == want);
  check_tiles_body(d);
  // Each Q8_0 tensor: all its int8 values, then all its fp32 scales.
  for (const auto& t : d["tensors"]) {
    if (t["type"] != "Q8_0") continue;
    const auto& p = t["parts"];
    REQUIRE(p.size() == 2);
    CHECK(p[0]["role"] == "q");
    CHECK(p[1]["role"] == "scales");
    const uint64_t elements = t["shape"][0].get<uint64_t>() * t["shape"][1].get<uint64_t>();
    CHECK(p[0]["bytes"].get<uint64_t>() == elements);
    CHECK(p[1]["offset"].get<uint64_t>() == p[0]["offset"].get<uint64_t>() + elements);
    CHECK(p[1]["bytes"].get<uint64_t>() == elements / 64 * 4);
  }
}

TEST_CASE("ajc1 writer output is byte-identical to a qwen3.c-style export of the same weights", "[formats]") {
  for (bool shared : {true, false}) {
    const auto dir = scratch_dir(std::string("facts_ajc1_bytes") + (shared ? "_t" : "_u"));
    WriterOptions o;
    o.format = FileFormat::AJC1;
    o.config = tiny_dense();
    o.config.shared_classifier = shared;
    const ModelConfig& c = o.config;
    const std::string path = (dir / "m.bin").string();
    write_model(path, o);

    QwenExport e;
    e.out.resize(256, 0);
    const int32_t hdr[] = {1, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
                           c.max_seq_len, c.head_dim, shared ? 1 : 0, 64};
    const uint32_t magic = 0x616A6331;
    std::memcpy(e.out.data(), &magic, 4);
    std::memcpy(e.out.data() + 4, hdr, sizeof hdr);
    const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
    for (int l = 0; l < c.n_layers; ++l) e.fp32(values_of(L(l, "input_layernorm.weight"), 1, d));
    for (int l = 0; l < c.n_layers; ++l) e.fp32(values_of(L(l, "post_attention_layernorm.weight"), 1, d));
    e.fp32(values_of("model.norm.weight", 1, d));
    for (int l = 0; l < c.n_layers; ++l) e.fp32(values_of(L(l, "self_attn.q_norm.weight"), 1, c.head_dim));
    for (int l = 0; l < c.n_layers; ++l) e.fp32(values_of(L(l, "self_attn.k_norm.weight"), 1, c.head_dim));
    e.q80(values_of("model.embed_tokens.weight", c.vocab_size, d), 64);
    struct M { const char* name; int64_t r, k; };
    const M mats[] = {{"self_attn.q_proj.weight", q, d}, {"self_attn.k_proj.weight", kv, d},
                      {"self_attn.v_proj.weight", kv, d}, {"self_attn.o_proj.weight", d, q},
                      {"mlp.gate_proj.weight", h, d}, {"mlp.down_proj.weight", d, h}, {"mlp.up_proj.weight", h, d}};
    for (const M& m : mats) {
      for (int l = 0; l < c.n_layers; ++l) e.q80(values_of(L(l, m.name), m.r, m.k), 64);
    }
    if (!shared) e.q80(values_of("lm_head.weight", c.vocab_size, d), 64);
    CHECK(read_bytes(path) == e.out);
  }
}

TEST_CASE("qwen3.c file sizes: Qwen3-0.6B, Qwen3-4B (matches a published log), Qwen3-8B untied", "[formats]") {
  auto size_of = [](int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv, bool tied) {
    formats::FileHeader h;
    h.format = FileFormat::AJC1;
    h.config.dim = dim;
    h.config.hidden_dim = hidden;
    h.config.n_layers = layers;
    h.config.n_heads = heads;
    h.config.n_kv_heads = kv;
    h.config.vocab_size = 151936;
    h.config.max_seq_len = 40960;
    h.config.head_dim = 128;
    h.config.shared_classifier = tied;
    h.config.group_size = 64;
    formats::validate_header(h, "qwen3");
    return formats::walk_layout(h, "qwen3", [](const formats::TensorEntry&) {});
  };
  CHECK(size_of(1024, 3072, 28, 16, 8, true) == 633495808ull);
  CHECK(size_of(2560, 9728, 36, 32, 8, true) == 4274448640ull);
  CHECK(size_of(4096, 12288, 36, 32, 8, false) == 8703561984ull);
}

TEST_CASE("moe3 header: bytes 3eom, MoE fields at 0x30/0x34/0x38, expert type and group at 0x48/0x4C", "[formats]") {
  const auto dir = scratch_dir("facts_moe3_header");
  WriterOptions o;
  o.format = FileFormat::MOE3;
  o.config = tiny_moe();
  o.config.rope_theta = 1e7f;
  o.expert_type = WeightType::INT8_GW_ASYM;
  o.expert_group_size = 32;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  const std::vector<uint8_t> b = read_bytes(path);
  CHECK(std::string(b.begin(), b.begin() + 4) == "3eom");
  CHECK(field<uint32_t>(b, 0) == 0x6D6F6533u);
  CHECK(field<int32_t>(b, 4) == 1);
  CHECK(field<int32_t>(b, 12) == 128);  // moe_intermediate_size
  CHECK(field<int32_t>(b, 0x30) == 4);
  CHECK(field<int32_t>(b, 0x34) == 2);
  CHECK(field<int32_t>(b, 0x38) == 1);
  CHECK(field<float>(b, 0x40) == 1e7f);
  CHECK(field<float>(b, 0x44) == 0.0f);  // default eps written as 0
  CHECK(field<int32_t>(b, 0x48) == 2);
  CHECK(field<int32_t>(b, 0x4C) == 32);
  CHECK(all_zero(b, 0x50, 256));
  CHECK(all_zero(b, 0x3C, 0x40));
}

TEST_CASE("moe3 body order: per layer wq, wk, wv, wo, router, experts w1, w2, w3, and grouped arrays for INT8 experts", "[formats]") {
  const auto dir = scratch_dir("facts_moe3_order");
  WriterOptions o;
  o.format = FileFormat::MOE3;
  o.config = tiny_moe();
  o.expert_type = WeightType::INT8_GW_SYM;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  auto f = ModelFile::open(path);
  const nlohmann::json d = f->describe();
  check_tiles_body(d);
  const std::vector<std::string> names = names_in_offset_order(d);
  // After the 9 norms (2 layers) and the embedding, layer 0 starts with the attention matrices.
  const size_t first = 4 * 2 + 1 + 1;
  const std::vector<std::string> layer0 = {L(0, "self_attn.q_proj.weight"), L(0, "self_attn.k_proj.weight"),
                                           L(0, "self_attn.v_proj.weight"), L(0, "self_attn.o_proj.weight"),
                                           L(0, "mlp.gate.weight")};
  CHECK(std::vector<std::string>(names.begin() + first, names.begin() + first + 5) == layer0);
  CHECK(names[first + 5] == L(0, "mlp.experts.0.gate_proj.weight"));
  CHECK(names[first + 9] == L(0, "mlp.experts.0.down_proj.weight"));
  CHECK(names[first + 13] == L(0, "mlp.experts.0.up_proj.weight"));
  CHECK(names[first + 17] == L(1, "self_attn.q_proj.weight"));
  // INT8 expert block: q of every expert, then scales of every expert.
  uint64_t q3_end = 0, s0 = 0;
  for (const auto& t : d["tensors"]) {
    if (t["name"] == L(0, "mlp.experts.3.gate_proj.weight")) {
      q3_end = t["parts"][0]["offset"].get<uint64_t>() + t["parts"][0]["bytes"].get<uint64_t>();
    }
    if (t["name"] == L(0, "mlp.experts.0.gate_proj.weight")) s0 = t["parts"][1]["offset"].get<uint64_t>();
  }
  CHECK(q3_end == s0);
}

TEST_CASE("ak48 header: packed uint8 shared_classifier at 36, int32 head_dim at 37 and group_size at 41, version 5", "[formats]") {
  const auto dir = scratch_dir("facts_ak48_header");
  WriterOptions o;
  o.format = FileFormat::AK48;
  o.config = tiny_dense();
  o.config.shared_classifier = false;
  o.config.rms_norm_eps = 1e-5f;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  const std::vector<uint8_t> b = read_bytes(path);
  CHECK(std::string(b.begin(), b.begin() + 4) == "84ka");
  CHECK(field<int32_t>(b, 4) == 5);
  CHECK(field<int32_t>(b, 8) == 64);
  CHECK(field<int32_t>(b, 32) == 128);
  CHECK(b[36] == 0);
  CHECK(field<int32_t>(b, 37) == 32);
  CHECK(field<int32_t>(b, 41) == 64);
  CHECK(field<float>(b, 45) == 0.0f);
  CHECK(field<float>(b, 49) == 1e-5f);
  CHECK(all_zero(b, 53, 256));
  auto f = ModelFile::open(path);
  const nlohmann::json d = f->describe();
  check_tiles_body(d);
  const std::vector<std::string> names = names_in_offset_order(d);
  CHECK(names[4] == "model.norm.weight");
  CHECK(names[5] == "model.embed_tokens.weight");
  CHECK(names[6] == L(0, "self_attn.q_proj.weight"));
  CHECK(names[7] == L(1, "self_attn.q_proj.weight"));
  CHECK(names[8] == L(0, "self_attn.k_proj.weight"));
  CHECK(names[6 + 14] == "lm_head.weight");
  CHECK(names[6 + 15] == L(0, "self_attn.q_norm.weight"));
  CHECK(names.back() == L(1, "self_attn.k_norm.weight"));
  for (const auto& t : d["tensors"]) {
    if (t["type"] != "AWQ_INT4") continue;
    CHECK(t["parts"][0]["role"] == "qweight");
    CHECK(t["parts"][1]["role"] == "qzeros");
    CHECK(t["parts"][2]["role"] == "scales");
  }
}

TEST_CASE("a hand-built zero-padded qwen3.c header reads with theta 1e6 and eps 1e-6", "[formats]") {
  const auto dir = scratch_dir("facts_hand_header");
  // Smallest legal model: every dimension 2, vocab 2, 1 layer, group 2.
  std::vector<uint8_t> b(256, 0);
  const uint32_t magic = 0x616A6331;
  const int32_t hdr[] = {1, 4, 4, 1, 2, 1, 2, 8, 2, 1, 4};  // version, dim, hidden, L, heads, kv, V, seq, hd, shared, G
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, hdr, sizeof hdr);
  auto push_f = [&](float v) { const auto* p = reinterpret_cast<const uint8_t*>(&v); b.insert(b.end(), p, p + 4); };
  for (int i = 0; i < 4 * 3; ++i) push_f(1.0f + static_cast<float>(i));  // attn, ffn, final norms (dim 4)
  for (int i = 0; i < 2 * 2; ++i) push_f(-1.0f - static_cast<float>(i)); // q_norm, k_norm (head_dim 2)
  // Q8_0 tensors (embedding [2][4], wq [4][4], wk [2][4], wv [2][4], wo [4][4], w1 [4][4], w2 [4][4], w3 [4][4]).
  const int64_t elements[] = {8, 16, 8, 8, 16, 16, 16, 16};
  for (int64_t n : elements) {
    for (int64_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(static_cast<int8_t>(i - 3)));
    for (int64_t g = 0; g < n / 4; ++g) push_f(0.5f * static_cast<float>(g + 1));
  }
  write_bytes(dir / "hand.bin", b);
  auto f = ModelFile::open((dir / "hand.bin").string());
  const ModelWeights& w = f->weights();
  CHECK(w.config.rope_theta == 1e6f);
  CHECK(w.config.rms_norm_eps == 1e-6f);
  CHECK(w.final_norm == std::vector<float>{9, 10, 11, 12});
  CHECK(w.layers[0].k_norm == std::vector<float>{-3, -4});
  // wo: element (row 2, col 1) is flat index 9 -> q = 6, group 2 -> scale 1.5.
  CHECK(dequant_element(w.layers[0].wo, 2, 1) == 9.0f);
  CHECK(dequant_element(w.embedding, 1, 3) == 4.0f * 1.0f);  // flat 7 -> q 4, group 1 -> scale 1.0
  CHECK(w.classifier.data == w.embedding.data);
}
