// qconvert's conversion: synthetic Hugging Face checkpoints in every storage variant to every format, values
// checked against the brief's quantization rules; AWQ pass-through; byte-identity with direct writing.
#include <catch2/catch.hpp>

#include <deque>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/half.h"
#include "models/convert/converter.h"
#include "models/formats/model_file.h"
#include "models/hf/checkpoint.h"
#include "models/hf/hf_config.h"
#include "models/hf/safetensors_writer.h"
#include "models/synthetic/presets.h"
#include "models/synthetic/synthetic.h"
#include "tests/convert/convert_test_support.h"

using namespace qt;
using namespace qt::test;
namespace fs = std::filesystem;

namespace {

// Each call writes its own folder (`tag` tells variants of one preset apart).
std::string hf_dir(const fs::path& root, const std::string& preset, const synthetic::HfWriteOptions& o,
                   uint64_t seed = 7, const std::string& tag = "") {
  const fs::path dir = root / ("hf-" + preset + tag);
  synthetic::write_hf_checkpoint(dir.string(), synthetic::preset_config(preset), seed, o);
  return dir.string();
}

convert::ConvertResult run(const std::string& hf, const fs::path& out, FileFormat format,
                           std::function<void(convert::ConvertOptions&)> tweak = {}) {
  convert::ConvertOptions o;
  o.hf_dir = hf;
  o.out_path = out.string();
  o.format = format;
  o.quiet = true;
  if (tweak) tweak(o);
  return convert::convert_checkpoint(o);
}

std::vector<float> source_values(const hf::HfCheckpoint& ck, const std::string& name) {
  hf::TensorRef r = ck.get(name);
  std::vector<float> v(r.info->numel());
  r.file->read_float(*r.info, 0, v.size(), v.data());
  return v;
}

// Expert views are made on demand from their stack; the maps below hand out pointers, so they live here.
const QTensor* kept_view(const QTensor& t) {
  static std::deque<QTensor> views;
  views.push_back(t);
  return &views.back();
}

// Every matrix of a model file with the Hugging Face name it came from.
std::vector<std::pair<std::string, const QTensor*>> matrices(const ModelWeights& w) {
  std::vector<std::pair<std::string, const QTensor*>> m;
  m.emplace_back("model.embed_tokens.weight", &w.embedding);
  if (!w.config.shared_classifier) m.emplace_back("lm_head.weight", &w.classifier);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m.emplace_back(p + "self_attn.q_proj.weight", &L.wq);
    m.emplace_back(p + "self_attn.k_proj.weight", &L.wk);
    m.emplace_back(p + "self_attn.v_proj.weight", &L.wv);
    m.emplace_back(p + "self_attn.o_proj.weight", &L.wo);
    if (!w.config.is_moe()) {
      m.emplace_back(p + "mlp.gate_proj.weight", &L.w1);
      m.emplace_back(p + "mlp.down_proj.weight", &L.w2);
      m.emplace_back(p + "mlp.up_proj.weight", &L.w3);
    } else {
      m.emplace_back(p + "mlp.gate.weight", &L.router);
      for (int64_t e = 0; e < L.expert_w1.experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        m.emplace_back(x + "gate_proj.weight", kept_view(L.expert_w1.expert(e)));
        m.emplace_back(x + "down_proj.weight", kept_view(L.expert_w2.expert(e)));
        m.emplace_back(x + "up_proj.weight", kept_view(L.expert_w3.expert(e)));
      }
    }
  }
  return m;
}

// Checks a stored matrix against the reference encoding of the source floats.
void check_matrix(const std::string& name, const QTensor& t, const std::vector<float>& w) {
  INFO(name << " stored as " << weight_type_name(t.type) << " group " << t.group_size);
  REQUIRE(static_cast<size_t>(t.rows * t.cols) == w.size());
  switch (t.type) {
    case WeightType::Q8_0: {
      const RefQ8 r = ref_q8_0(w, t.group_size);
      CHECK(same_array(static_cast<const int8_t*>(t.data), r.q));
      CHECK(same_array(t.scales_f32, r.scales));
      break;
    }
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM: {
      const bool asym = t.type == WeightType::INT8_GW_ASYM;
      const RefInt8 r = ref_int8_gw(w, t.rows, t.cols, t.group_size, asym);
      CHECK(same_array(static_cast<const uint8_t*>(t.data), r.q));
      CHECK(same_array(t.scales_f16, r.scales));
      if (asym) CHECK(same_array(t.zeros_f16, r.zeros));
      break;
    }
    case WeightType::AWQ_INT4: {
      const RefAwq r = ref_awq(w, t.rows, t.cols, t.group_size);
      CHECK(same_array(static_cast<const int32_t*>(t.data), r.qweight));
      CHECK(same_array(t.qzeros, r.qzeros));
      CHECK(same_array(t.scales_f16, r.scales));
      break;
    }
    case WeightType::F16: {
      std::vector<uint16_t> h(w.size());
      for (size_t i = 0; i < w.size(); ++i) h[i] = float_to_half_bits(w[i]);
      CHECK(same_array(static_cast<const uint16_t*>(t.data), h));
      break;
    }
    case WeightType::F32:
      CHECK(same_array(static_cast<const float*>(t.data), w));
      break;
    default:
      FAIL("unexpected type");
  }
}

// Norm vectors are stored exactly (fp32 files) or rounded to fp16 (ak48); the views widen them to fp32.
void check_norms(const ModelWeights& w, const hf::HfCheckpoint& ck, bool fp16) {
  auto expect = [&](const std::string& name, const std::vector<float>& got) {
    std::vector<float> want = source_values(ck, name);
    if (fp16)
      for (float& x : want) x = round_to_half(x);
    INFO(name);
    CHECK(got == want);
  };
  expect("model.norm.weight", w.final_norm);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    expect(p + "input_layernorm.weight", w.layers[l].attn_norm);
    expect(p + "post_attention_layernorm.weight", w.layers[l].ffn_norm);
    expect(p + "self_attn.q_norm.weight", w.layers[l].q_norm);
    expect(p + "self_attn.k_norm.weight", w.layers[l].k_norm);
  }
}

void check_file_against_source(const fs::path& file, const std::string& hf) {
  const hf::HfCheckpoint ck(hf);
  auto mf = ModelFile::open(file.string());
  const ModelWeights& w = mf->weights();
  for (const auto& [name, t] : matrices(w)) check_matrix(name, *t, source_values(ck, name));
  check_norms(w, ck, mf->format() == FileFormat::AK48);
}

}  // namespace

TEST_CASE("convert: fp32/fp16/bf16 checkpoints, single and sharded, become ajc1 by qwen3.c's Q8_0 rule", "[convert]") {
  const auto root = convert_scratch("dense-ajc1");
  for (auto dtype : {synthetic::HfDType::F32, synthetic::HfDType::F16, synthetic::HfDType::BF16}) {
    for (uint64_t shard : {uint64_t{0}, uint64_t{40000}}) {
      INFO("dtype " << int(dtype) << " shard " << shard);
      synthetic::HfWriteOptions o;
      o.dtype = dtype;
      o.shard_bytes = shard;
      const std::string hf = hf_dir(root, "tiny-untied", o);
      if (shard) CHECK(fs::exists(fs::path(hf) / "model.safetensors.index.json"));
      const auto r = run(hf, root / "m.ajc1", FileFormat::AJC1);
      CHECK(r.awq_passthrough == 0);
      auto mf = ModelFile::open((root / "m.ajc1").string());
      CHECK(mf->config().group_size == 64);  // qwen3.c: 64 divides dim 64
      CHECK_FALSE(mf->config().shared_classifier);
      CHECK(mf->config().head_dim == 32);  // != dim / n_heads
      check_file_against_source(root / "m.ajc1", hf);
    }
  }
}

TEST_CASE("convert: ak48 from float weights follows the AWQ round-to-nearest rule with fp16 norms", "[convert]") {
  const auto root = convert_scratch("dense-ak48");
  synthetic::HfWriteOptions o;
  o.dtype = synthetic::HfDType::BF16;
  const std::string hf = hf_dir(root, "tiny", o);
  run(hf, root / "m.ak48", FileFormat::AK48, [](auto& c) { c.group_size = 32; });
  auto mf = ModelFile::open((root / "m.ak48").string());
  CHECK(mf->config().group_size == 32);
  CHECK(mf->config().shared_classifier);  // tie_word_embeddings: no lm_head stored or needed
  check_file_against_source(root / "m.ak48", hf);
}

TEST_CASE("convert: moe3 experts are encoded by the rule of each expert type", "[convert]") {
  const auto root = convert_scratch("moe");
  synthetic::HfWriteOptions o;
  o.dtype = synthetic::HfDType::BF16;
  o.shard_bytes = 100000;
  const std::string hf = hf_dir(root, "tiny-moe", o);
  for (auto type : {WeightType::Q8_0, WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM, WeightType::AWQ_INT4}) {
    INFO(weight_type_name(type));
    run(hf, root / "m.moe3", FileFormat::MOE3, [&](auto& c) {
      c.expert_type = type;
      if (type != WeightType::Q8_0) c.expert_group_size = 32;  // Q8_0 experts share the header group
    });
    auto mf = ModelFile::open((root / "m.moe3").string());
    CHECK(mf->config().num_experts == 8);
    CHECK(mf->config().norm_topk_prob);
    CHECK(mf->weights().layers[1].expert_w2.expert(7).type == type);
    check_file_against_source(root / "m.moe3", hf);
  }
}

TEST_CASE("convert: an fp32 checkpoint converts to the same bytes as the synthetic model written directly", "[convert]") {
  const auto root = convert_scratch("direct");
  struct Case {
    const char* preset;
    FileFormat format;
    WeightType experts;
  };
  for (const Case& c : {Case{"tiny", FileFormat::AJC1, WeightType::Q8_0}, Case{"tiny-untied", FileFormat::AK48, WeightType::Q8_0},
                        Case{"tiny-moe", FileFormat::MOE3, WeightType::INT8_GW_ASYM}}) {
    INFO(c.preset);
    const std::string hf = hf_dir(root, c.preset, {}, 3);
    run(hf, root / "converted", c.format, [&](auto& o) {
      if (c.format == FileFormat::MOE3) o.expert_type = c.experts;
    });
    WriterOptions w;
    w.format = c.format;
    w.config = synthetic::preset_config(c.preset);
    w.expert_type = c.experts;
    synthetic::write_model_file((root / "direct").string(), w, 3);
    const auto a = file_bytes(root / "converted"), b = file_bytes(root / "direct");
    CHECK(a.size() > 10000);
    CHECK(a == b);
  }
}

TEST_CASE("convert and synthetic: row-range streaming in small odd chunks gives the same bytes as whole tensors",
          "[convert]") {
  // The default chunk (4 M floats) holds every tiny tensor whole; budgets of a few hundred floats force
  // ranges of 1 to 7 rows through every source path: plain float (fp32, bf16), fused v5 experts, and
  // AutoAWQ weights dequantized for Q8_0 / INT8 slots.
  const auto root = convert_scratch("chunked");
  struct Case {
    const char* tag;
    const char* preset;
    synthetic::HfWriteOptions hf;
    FileFormat format;
    WeightType experts;
  };
  synthetic::HfWriteOptions bf16, fused, awq;
  bf16.dtype = synthetic::HfDType::BF16;
  fused.fused_experts = true;
  awq.awq_group_size = 32;
  const Case cases[] = {
      {"f32-ajc1", "tiny", {}, FileFormat::AJC1, WeightType::Q8_0},
      {"bf16-ak48", "tiny-untied", bf16, FileFormat::AK48, WeightType::Q8_0},
      {"fused-int8", "tiny-moe", fused, FileFormat::MOE3, WeightType::INT8_GW_ASYM},
      {"fused-awq", "tiny-moe", fused, FileFormat::MOE3, WeightType::AWQ_INT4},
      {"awq-ajc1", "tiny-untied", awq, FileFormat::AJC1, WeightType::Q8_0},
      {"awq-moe3-int8", "tiny-moe", awq, FileFormat::MOE3, WeightType::INT8_GW_SYM},
  };
  for (const Case& c : cases) {
    INFO(c.tag);
    const std::string hf = hf_dir(root, c.preset, c.hf, 5, c.tag);
    auto tweak = [&](int64_t chunk) {
      return [&c, chunk](convert::ConvertOptions& o) {
        if (c.format == FileFormat::MOE3) o.expert_type = c.experts;
        o.chunk_floats = chunk;
      };
    };
    run(hf, root / "whole", c.format, tweak(kWriterChunkFloats));
    const auto whole = file_bytes(root / "whole");
    REQUIRE(whole.size() > 10000);
    for (int64_t chunk : {int64_t{1}, int64_t{3 * 64 + 17}, int64_t{7 * 64 - 1}}) {
      INFO("chunk_floats " << chunk);
      run(hf, root / "chunked", c.format, tweak(chunk));
      CHECK(file_bytes(root / "chunked") == whole);
    }
  }
  WriterOptions w;
  w.format = FileFormat::MOE3;
  w.config = synthetic::preset_config("tiny-moe");
  w.expert_type = WeightType::AWQ_INT4;
  synthetic::write_model_file((root / "synthetic-whole").string(), w, 9);
  synthetic::write_model_file((root / "synthetic-chunked").string(), w, 9, true, 5 * 64 - 3);
  CHECK(file_bytes(root / "synthetic-chunked") == file_bytes(root / "synthetic-whole"));
}

TEST_CASE("convert: AutoAWQ checkpoints pass through bit-exact and match converting the float weights", "[convert]") {
  const auto root = convert_scratch("awq");
  synthetic::HfWriteOptions awq;
  awq.awq_group_size = 32;
  const std::string hf_awq = hf_dir(root, "tiny-untied", awq);
  const hf::HfCheckpoint ck(hf_awq);
  const auto r = run(hf_awq, root / "awq.ak48", FileFormat::AK48);
  CHECK(r.awq_passthrough == 2 * 7);
  auto mf = ModelFile::open((root / "awq.ak48").string());
  CHECK(mf->config().group_size == 32);  // taken from quantization_config
  const QTensor& wo = mf->weights().layers[1].wo;
  auto raw = [&](const std::string& n) {
    hf::TensorRef t = ck.get(n);
    return std::vector<uint8_t>(t.file->data(*t.info), t.file->data(*t.info) + t.info->nbytes);
  };
  CHECK(same_array(static_cast<const uint8_t*>(wo.data), raw("model.layers.1.self_attn.o_proj.qweight")));
  CHECK(same_array(reinterpret_cast<const uint8_t*>(wo.qzeros), raw("model.layers.1.self_attn.o_proj.qzeros")));
  CHECK(same_array(reinterpret_cast<const uint8_t*>(wo.scales_f16), raw("model.layers.1.self_attn.o_proj.scales")));

  // The AWQ checkpoint was quantized from the same synthetic floats by the same rule, and its fp16 tensors
  // are what ak48 rounds the float ones to: the two conversions must agree byte for byte.
  const std::string hf_float = hf_dir(root, "tiny-untied", {}, 7, "-float");
  run(hf_float, root / "float.ak48", FileFormat::AK48, [](auto& o) { o.group_size = 32; });
  CHECK(file_bytes(root / "awq.ak48") == file_bytes(root / "float.ak48"));

  // A different group forces dequantize + requantize: no pass-through, still a valid file.
  CHECK(run(hf_awq, root / "g16.ak48", FileFormat::AK48, [](auto& o) { o.group_size = 16; }).awq_passthrough == 0);
  CHECK(ModelFile::open((root / "g16.ak48").string())->config().group_size == 16);

  // Q8_0 targets quantize the dequantized AWQ weights: w = (q - z) * s.
  run(hf_awq, root / "awq.ajc1", FileFormat::AJC1);
  auto q8 = ModelFile::open((root / "awq.ajc1").string());
  const QTensor& awq_wo = mf->weights().layers[1].wo;
  check_matrix("o_proj from AWQ", q8->weights().layers[1].wo, dequantize(awq_wo));
}

TEST_CASE("convert: AWQ MoE experts pass through and fused v5 experts equal per-expert tensors", "[convert]") {
  const auto root = convert_scratch("moe-variants");
  synthetic::HfWriteOptions awq;
  awq.awq_group_size = 32;
  const std::string hf_awq = hf_dir(root, "tiny-moe", awq);
  const auto r = run(hf_awq, root / "awq.moe3", FileFormat::MOE3, [](auto& o) { o.expert_type = WeightType::AWQ_INT4; });
  CHECK(r.awq_passthrough == 2 * 8 * 3);
  auto mf = ModelFile::open((root / "awq.moe3").string());
  const hf::HfCheckpoint ck(hf_awq);
  hf::TensorRef q = ck.get("model.layers.0.mlp.experts.5.up_proj.qweight");
  CHECK(std::memcmp(mf->weights().layers[0].expert_w3.expert(5).data, q.file->data(*q.info), q.info->nbytes) == 0);

  synthetic::HfWriteOptions fused;
  fused.fused_experts = true;
  fused.dtype = synthetic::HfDType::F16;
  const std::string hf_fused = hf_dir(root, "tiny-moe", fused, 7, "-fused");
  CHECK(hf::HfCheckpoint(hf_fused).find("model.layers.1.mlp.experts.gate_up_proj"));
  synthetic::HfWriteOptions plain;
  plain.dtype = synthetic::HfDType::F16;
  const std::string hf_plain = hf_dir(root, "tiny-moe", plain, 7, "-plain");
  run(hf_fused, root / "fused.moe3", FileFormat::MOE3);
  run(hf_plain, root / "plain.moe3", FileFormat::MOE3);
  CHECK(file_bytes(root / "fused.moe3") == file_bytes(root / "plain.moe3"));
}

namespace {

// Rewrites a checkpoint's single model.safetensors through `edit`, which may drop (return false) or change
// the spec of a tensor; the data of a changed tensor is filled with zeros.
void rewrite(const std::string& dir, const std::function<bool(hf::TensorSpec&)>& edit) {
  std::vector<hf::TensorSpec> specs;
  std::vector<std::vector<uint8_t>> data;
  {
    hf::SafetensorsFile f(dir + "/model.safetensors");
    for (const auto& [name, t] : f.tensors()) {
      hf::TensorSpec s{name, t.dtype, t.shape};
      if (!edit(s)) continue;
      const bool same = s.dtype == t.dtype && s.shape == t.shape;
      data.push_back(same ? std::vector<uint8_t>(f.data(t), f.data(t) + t.nbytes) : std::vector<uint8_t>(s.nbytes()));
      specs.push_back(s);
    }
  }
  hf::SafetensorsWriter w(dir + "/model.safetensors", specs);
  for (size_t i = 0; i < specs.size(); ++i) w.write(specs[i].name, data[i].data(), data[i].size());
  w.finish();
}

std::string convert_error(const std::string& hf, const fs::path& out, FileFormat f,
                          std::function<void(convert::ConvertOptions&)> tweak = {}) {
  try {
    run(hf, out, f, tweak);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitBadInput);
    CHECK_FALSE(fs::exists(out));  // no partial output is left behind
    return e.what();
  }
  return "(converted)";
}

}  // namespace

TEST_CASE("convert: missing tensors, wrong shapes and dtypes, and mismatched formats are clear errors", "[convert]") {
  const auto root = convert_scratch("errors");
  const auto out = root / "out.bin";
  auto fresh = [&](const char* preset) { return hf_dir(root, preset, {}); };

  std::string hf = fresh("tiny-untied");
  rewrite(hf, [](auto& s) { return s.name != "model.layers.1.mlp.up_proj.weight"; });
  CHECK_THAT(convert_error(hf, out, FileFormat::AJC1), Catch::Contains("'model.layers.1.mlp.up_proj.weight' not found") && Catch::Contains(hf));

  hf = fresh("tiny-untied");
  rewrite(hf, [](auto& s) {
    if (s.name == "model.layers.0.self_attn.k_proj.weight") s.shape = {64, 32};
    return true;
  });
  CHECK_THAT(convert_error(hf, out, FileFormat::AJC1),
             Catch::Contains("model.safetensors: tensor 'model.layers.0.self_attn.k_proj.weight' has shape [64, 32], expected [64, 64]"));

  hf = fresh("tiny-untied");
  rewrite(hf, [](auto& s) {
    if (s.name == "model.norm.weight") s.dtype = hf::DType::I32;
    return true;
  });
  CHECK_THAT(convert_error(hf, out, FileFormat::AK48), Catch::Contains("'model.norm.weight' has dtype I32"));

  hf = fresh("tiny-untied");
  rewrite(hf, [](auto& s) { return s.name != "lm_head.weight"; });
  CHECK_THAT(convert_error(hf, out, FileFormat::AJC1), Catch::Contains("'lm_head.weight' not found") && Catch::Contains("tie_word_embeddings = false"));

  // A config that names fewer layers than the shards hold would drop the rest silently.
  hf = fresh("tiny-untied");
  {
    const fs::path cfg = fs::path(hf) / "config.json";
    std::ifstream in(cfg);
    nlohmann::json j = nlohmann::json::parse(in);
    const int layers = j["num_hidden_layers"].get<int>();
    REQUIRE(layers >= 2);
    j["num_hidden_layers"] = layers - 1;
    std::ofstream(cfg) << j.dump();
    CHECK_THAT(convert_error(hf, out, FileFormat::AJC1),
               Catch::Contains("num_hidden_layers = " + std::to_string(layers - 1)) &&
                   Catch::Contains("holds layer " + std::to_string(layers - 1)) && Catch::Contains("config.json"));
  }

  hf = fresh("tiny");
  CHECK_THAT(convert_error(hf, out, FileFormat::MOE3), Catch::Contains("dense Qwen3 checkpoint cannot be written as moe3"));
  CHECK_THAT(convert_error(hf, out, FileFormat::AJC1, [](auto& o) { o.expert_type = WeightType::AWQ_INT4; }),
             Catch::Contains("--expert-type only applies"));
  CHECK_THAT(convert_error(hf, out, FileFormat::AJC1, [](auto& o) { o.group_size = 48; }), Catch::Contains("group_size"));
  CHECK_THAT(convert_error((root / "nowhere").string(), out, FileFormat::AJC1), Catch::Contains("not a directory"));
  fs::remove(fs::path(hf) / "config.json");
  CHECK_THAT(convert_error(hf, out, FileFormat::AJC1), Catch::Contains("config.json"));
  CHECK_THAT(convert_error(fresh("tiny-moe"), out, FileFormat::AJC1), Catch::Contains("can only be written as moe3"));
  CHECK_THROWS_WITH(convert::parse_expert_type("int4"), Catch::Contains("unknown type 'int4'"));
}

TEST_CASE("convert: an lm_head equal to the embedding is shared, as qwen3.c's torch.equal test decides", "[convert]") {
  const auto root = convert_scratch("tied");
  const std::string hf = hf_dir(root, "tiny-untied", {});
  {  // Store lm_head as a copy of the embedding, config still untied.
    std::vector<hf::TensorSpec> specs;
    std::vector<std::vector<uint8_t>> data;
    hf::SafetensorsFile f(hf + "/model.safetensors");
    const hf::TensorInfo& emb = *f.find("model.embed_tokens.weight");
    for (const auto& [name, t] : f.tensors()) {
      specs.push_back({name, t.dtype, t.shape});
      const hf::TensorInfo& src = name == "lm_head.weight" ? emb : t;
      data.emplace_back(f.data(src), f.data(src) + src.nbytes);
    }
    hf::SafetensorsWriter w(hf + "/copy.safetensors", specs);
    for (size_t i = 0; i < specs.size(); ++i) w.write(specs[i].name, data[i].data(), data[i].size());
    w.finish();
  }
  fs::rename(hf + "/copy.safetensors", hf + "/model.safetensors");
  run(hf, root / "m.ajc1", FileFormat::AJC1);
  CHECK(ModelFile::open((root / "m.ajc1").string())->config().shared_classifier);
}

TEST_CASE("convert: tokenizer files are copied next to the output", "[convert]") {
  const auto root = convert_scratch("tokenizer-copy");
  const std::string hf = hf_dir(root, "tiny", {});
  put_bytes(fs::path(hf) / "tokenizer.json", "{\"model\": {}}");
  put_bytes(fs::path(hf) / "tokenizer_config.json", "{}");
  fs::create_directories(root / "out");
  const auto r = run(hf, root / "out" / "m.ajc1", FileFormat::AJC1);
  CHECK(r.copied_files.size() == 2);
  CHECK(file_bytes(root / "out" / "tokenizer.json") == file_bytes(fs::path(hf) / "tokenizer.json"));
  run(hf, root / "out" / "m.ajc1", FileFormat::AJC1, [](auto& o) { o.copy_tokenizer = false; });
}
