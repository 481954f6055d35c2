// Files written by the golden engineer's independent Python writer (scripts/golden/qwen3c_writer.py,
// tests/golden/files) and the AutoAWQ packing reference (tests/golden/awq_packing): our reader must see
// the quantization rules applied to the source checkpoint, and our writer must reproduce each file byte
// for byte from the same Hugging Face checkpoint.
#include <catch2/catch.hpp>

#include <deque>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/half.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "models/quant/awq_int4.h"
#include "models/quant/quantized_tensor.h"
#include "tests/formats/test_support.h"
#include "common/paths.h"

using namespace qt;
using namespace qt::test;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(qt::source_root()) / "tests" / "golden";

// A whole small .safetensors file: 8-byte header length, JSON header, data (test-local, independent of
// models/hf).
struct Safetensors {
  std::vector<uint8_t> bytes;
  nlohmann::json header;
  size_t data_start = 0;

  explicit Safetensors(const fs::path& p) : bytes(read_bytes(p)) {
    REQUIRE(bytes.size() >= 8);
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    REQUIRE(8 + n <= bytes.size());
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
    data_start = 8 + n;
  }
  bool has(const std::string& name) const { return header.contains(name); }
  const uint8_t* raw(const std::string& name, const std::string& dtype, size_t count) const {
    INFO(name);
    REQUIRE(has(name));
    const auto& t = header.at(name);
    REQUIRE(t.at("dtype") == dtype);
    const auto off = t.at("data_offsets");
    const size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
    const size_t width = dtype == "F32" || dtype == "I32" ? 4 : 2;
    REQUIRE(end - begin == count * width);
    return bytes.data() + data_start + begin;
  }
  std::vector<float> floats(const std::string& name, size_t count) const {
    const std::string dtype = header.at(name).at("dtype");
    const uint8_t* p = raw(name, dtype, count);
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) {
      if (dtype == "F32") {
        std::memcpy(&v[i], p + 4 * i, 4);
      } else {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        v[i] = dtype == "F16" ? half_bits_to_float(b) : bf16_bits_to_float(b);
      }
    }
    return v;
  }
};

nlohmann::json load_json(const fs::path& p) {
  const std::vector<uint8_t> b = read_bytes(p);
  REQUIRE(!b.empty());
  return nlohmann::json::parse(b.begin(), b.end());
}

std::string flag_value(const std::string& command, const std::string& flag) {
  const size_t at = command.find(flag + " ");
  if (at == std::string::npos) return "";
  const size_t begin = at + flag.size() + 1;
  return command.substr(begin, command.find(' ', begin) - begin);
}

WeightType expert_type_of(const std::string& name) {
  if (name == "int8-sym") return WeightType::INT8_GW_SYM;
  if (name == "int8-asym") return WeightType::INT8_GW_ASYM;
  if (name == "awq") return WeightType::AWQ_INT4;
  REQUIRE((name.empty() || name == "q8_0"));
  return WeightType::Q8_0;
}

WriterOptions options_for(const nlohmann::json& entry, const nlohmann::json& cfg) {
  const std::string cmd = entry.at("equivalent_to");
  WriterOptions o;
  o.format = parse_file_format(entry.at("format"));
  ModelConfig& c = o.config;
  const bool moe = cfg.at("architectures")[0] == "Qwen3MoeForCausalLM";
  c.arch = moe ? ModelArch::Qwen3Moe : ModelArch::Qwen3Dense;
  c.dim = cfg.at("hidden_size");
  c.hidden_dim = moe ? cfg.at("moe_intermediate_size") : cfg.at("intermediate_size");
  c.n_layers = cfg.at("num_hidden_layers");
  c.n_heads = cfg.at("num_attention_heads");
  c.n_kv_heads = cfg.at("num_key_value_heads");
  c.vocab_size = cfg.at("vocab_size");
  c.max_seq_len = cfg.at("max_position_embeddings");
  c.head_dim = cfg.at("head_dim");
  c.shared_classifier = cfg.value("tie_word_embeddings", false);
  c.rope_theta = cfg.at("rope_theta").get<float>();
  c.rms_norm_eps = cfg.at("rms_norm_eps").get<float>();
  if (moe) {
    c.num_experts = cfg.at("num_experts");
    c.num_experts_per_tok = cfg.at("num_experts_per_tok");
    c.norm_topk_prob = cfg.at("norm_topk_prob");
  }
  if (cfg.contains("quantization_config")) c.group_size = cfg.at("quantization_config").at("group_size");
  o.expert_type = expert_type_of(flag_value(cmd, "--expert-type"));
  const std::string eg = flag_value(cmd, "--expert-group-size");
  o.expert_group_size = eg.empty() ? 0 : std::stoi(eg);
  return o;
}

std::string awq_base(const std::string& hf_name) { return hf_name.substr(0, hf_name.size() - std::string(".weight").size()); }

// Expert views are made on demand from their stack; the maps below hand out pointers, so they live here.
const QTensor* kept_view(const QTensor& t) {
  static std::deque<QTensor> views;
  views.push_back(t);
  return &views.back();
}

std::map<std::string, const QTensor*> matrices(const ModelWeights& w) {
  std::map<std::string, const QTensor*> m;
  m["model.embed_tokens.weight"] = &w.embedding;
  m["lm_head.weight"] = &w.classifier;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m[p + "self_attn.q_proj.weight"] = &lw.wq;
    m[p + "self_attn.k_proj.weight"] = &lw.wk;
    m[p + "self_attn.v_proj.weight"] = &lw.wv;
    m[p + "self_attn.o_proj.weight"] = &lw.wo;
    m[p + "mlp.gate_proj.weight"] = &lw.w1;
    m[p + "mlp.down_proj.weight"] = &lw.w2;
    m[p + "mlp.up_proj.weight"] = &lw.w3;
    m[p + "mlp.gate.weight"] = &lw.router;
    for (int64_t e = 0; e < lw.expert_w1.experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      m[x + "gate_proj.weight"] = kept_view(lw.expert_w1.expert(e));
      m[x + "down_proj.weight"] = kept_view(lw.expert_w2.expert(e));
      m[x + "up_proj.weight"] = kept_view(lw.expert_w3.expert(e));
    }
  }
  return m;
}

}  // namespace

TEST_CASE("golden qwen3.c-layout files from the independent Python writer: values and byte-identical rewrite", "[formats]") {
  const nlohmann::json manifest = load_json(kGolden / "manifest.json");
  REQUIRE(manifest.at("files").size() >= 9);
  for (const auto& entry : manifest.at("files")) {
    const std::string file = entry.at("file");
    DYNAMIC_SECTION(file) {
      const fs::path golden = kGolden / file;
      const fs::path hf_dir = fs::path(qt::source_root()) / flag_value(entry.at("equivalent_to"), "--hf");
      const nlohmann::json cfg = load_json(hf_dir / "config.json");
      const Safetensors st(hf_dir / "model.safetensors");
      WriterOptions o = options_for(entry, cfg);
      if (o.format == FileFormat::AK48) o.config.shared_classifier = !st.has("lm_head.weight");

      // 1. Our writer, fed the same checkpoint, reproduces the file exactly.
      const fs::path ours = scratch_dir("golden_" + fs::path(file).filename().string()) / "ours.bin";
      {
        auto w = ModelWriter::create(ours.string(), o);
        for (const TensorSlot& s : w->plan()) {
          const size_t n = static_cast<size_t>(s.rows * s.cols);
          if (s.type == WeightType::AWQ_INT4 && o.format == FileFormat::AK48) {
            const std::string b = awq_base(s.hf_name);
            const size_t groups = static_cast<size_t>(s.cols / s.group_size);
            const auto* qw = reinterpret_cast<const int32_t*>(st.raw(b + ".qweight", "I32", n / 8));
            const auto* qz = reinterpret_cast<const int32_t*>(st.raw(b + ".qzeros", "I32", groups * static_cast<size_t>(s.rows) / 8));
            const auto* sc = reinterpret_cast<const uint16_t*>(st.raw(b + ".scales", "F16", groups * static_cast<size_t>(s.rows)));
            // safetensors data is 8-byte aligned in these files; the casts above read aligned words.
            w->write_awq(s, qw, qz, sc);
          } else {
            const std::vector<float> v = st.floats(s.hf_name, n);
            w->write_float(s, v.data());
          }
        }
        w->finish();
      }
      const std::vector<uint8_t> want = read_bytes(golden);
      CHECK(want.size() == entry.at("bytes").get<size_t>());
      CHECK(read_bytes(ours) == want);

      // 2. Reading the Python-written file gives the rules applied to the checkpoint's floats.
      auto f = ModelFile::open(golden.string());
      const ModelConfig& c = f->config();
      CHECK(c.dim == o.config.dim);
      CHECK(c.hidden_dim == o.config.hidden_dim);
      CHECK(c.head_dim == o.config.head_dim);
      CHECK(c.rope_theta == o.config.rope_theta);
      CHECK(c.rms_norm_eps == o.config.rms_norm_eps);
      CHECK(c.num_experts == o.config.num_experts);
      CHECK(c.norm_topk_prob == o.config.norm_topk_prob);
      CHECK(c.shared_classifier == o.config.shared_classifier);
      if (o.format != FileFormat::AK48) {
        const auto m = matrices(f->weights());
        for (const auto& [name, t] : m) {
          if (t->empty() || (name == "lm_head.weight" && c.shared_classifier)) continue;
          INFO(name);
          const std::vector<float> src = st.floats(name, static_cast<size_t>(t->rows * t->cols));
          CHECK(dequantize(*t) == ref_dequant(src, t->rows, t->cols, t->type, t->group_size));
        }
        CHECK(f->weights().final_norm == st.floats("model.norm.weight", static_cast<size_t>(c.dim)));
      } else {
        const std::vector<float> emb = st.floats("model.embed_tokens.weight", static_cast<size_t>(c.vocab_size) * c.dim);
        CHECK(dequantize(f->weights().embedding) == emb);
        CHECK(f->weights().layers.back().k_norm ==
              st.floats("model.layers." + std::to_string(c.n_layers - 1) + ".self_attn.k_norm.weight",
                        static_cast<size_t>(c.head_dim)));
      }
    }
  }
}

TEST_CASE("AWQ packing matches the AutoAWQ-layout reference: qweight, qzeros, scales, unpacked q and dequant", "[formats]") {
  const fs::path dir = kGolden / "awq_packing";
  const nlohmann::json manifest = load_json(kGolden / "manifest.json");
  const auto& ref = manifest.at("awq_packing");
  const int64_t K = ref.at("K"), N = ref.at("N"), G = ref.at("group_size");
  auto load = [&](const char* name, size_t width, size_t count) {
    std::vector<uint8_t> b = read_bytes(dir / name);
    REQUIRE(b.size() == width * count);
    return b;
  };
  const size_t nk = static_cast<size_t>(N * K), ng = static_cast<size_t>(K / G * N);
  const std::vector<uint8_t> wb = load("weight.f32", 4, nk);
  std::vector<float> w(nk);
  std::memcpy(w.data(), wb.data(), wb.size());
  const quant::QuantizedTensor q = quant::quantize_tensor(w.data(), N, K, WeightType::AWQ_INT4, static_cast<int32_t>(G));
  CHECK(std::memcmp(q.qweight.data(), load("qweight.i32", 4, nk / 8).data(), nk / 2) == 0);
  CHECK(std::memcmp(q.qzeros.data(), load("qzeros.i32", 4, ng / 8).data(), ng / 2) == 0);
  CHECK(std::memcmp(q.scales_f16.data(), load("scales.f16", 2, ng).data(), ng * 2) == 0);
  // Unpacking the reference words gives the reference nibbles.
  const std::vector<uint8_t> qw = load("qweight.i32", 4, nk / 8), qu = load("q.u8", 1, nk);
  const std::vector<uint8_t> zw = load("qzeros.i32", 4, ng / 8), zu = load("zeros.u8", 1, ng);
  for (size_t i = 0; i < nk; ++i) {
    uint32_t word;
    std::memcpy(&word, qw.data() + 4 * (i / 8), 4);
    REQUIRE(quant::awq_unpack(word, static_cast<int>(i % 8)) == qu[i]);
  }
  for (size_t i = 0; i < ng; ++i) {
    uint32_t word;
    std::memcpy(&word, zw.data() + 4 * (i / 8), 4);
    REQUIRE(quant::awq_unpack(word, static_cast<int>(i % 8)) == zu[i]);
  }
  const std::vector<uint8_t> db = load("dequant.f32", 4, nk);
  std::vector<float> deq(nk);
  std::memcpy(deq.data(), db.data(), db.size());
  CHECK(dequantize(q.view()) == deq);
  if (ref.contains("example_word")) {
    const auto& ex = ref.at("example_word");
    const uint32_t packed = static_cast<uint32_t>(std::stoul(ex.at("packed_hex").get<std::string>(), nullptr, 16));
    uint8_t vals[8];
    for (int e = 0; e < 8; ++e) vals[e] = ex.at("logical_values")[static_cast<size_t>(e)].get<uint8_t>();
    CHECK(quant::awq_pack8(vals) == packed);
  }
}
