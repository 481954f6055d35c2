// Synthetic checkpoints: deterministic across runs and machines, N(0, 0.02)-like weights and norms near 1.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/formats/model_file.h"
#include "models/hf/checkpoint.h"
#include "models/synthetic/presets.h"
#include "models/synthetic/random_weights.h"
#include "models/synthetic/synthetic.h"
#include "tests/convert/convert_test_support.h"

using namespace qt;
using namespace qt::test;
namespace fs = std::filesystem;

TEST_CASE("synthetic: the same seed gives byte-identical files, another seed different ones", "[synthetic]") {
  const auto root = convert_scratch("synthetic-determinism");
  WriterOptions w;
  w.format = FileFormat::MOE3;
  w.config = synthetic::preset_config("tiny-moe");
  w.expert_type = WeightType::INT8_GW_SYM;
  synthetic::write_model_file((root / "a.moe3").string(), w, 11);
  synthetic::write_model_file((root / "b.moe3").string(), w, 11);
  synthetic::write_model_file((root / "c.moe3").string(), w, 12);
  CHECK(file_bytes(root / "a.moe3") == file_bytes(root / "b.moe3"));
  CHECK(file_bytes(root / "a.moe3") != file_bytes(root / "c.moe3"));

  synthetic::HfWriteOptions o;
  o.dtype = synthetic::HfDType::BF16;
  o.shard_bytes = 50000;
  const ModelConfig c = synthetic::preset_config("tiny");
  synthetic::write_hf_checkpoint((root / "hf1").string(), c, 5, o);
  synthetic::write_hf_checkpoint((root / "hf2").string(), c, 5, o);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(root / "hf1")) {
    ++files;
    CHECK(file_bytes(e.path()) == file_bytes(root / "hf2" / e.path().filename()));
  }
  CHECK(files > 3);  // config.json, the index and several shards
}

TEST_CASE("synthetic: values are pinned integer-hash functions of seed, tensor name and index", "[synthetic]") {
  // Element values must not depend on the platform's libm or on generation order: these numbers are the
  // contract that makes `qconvert synthetic --seed 1` the same model everywhere.
  float v[4];
  synthetic::generate_values(1, "model.embed_tokens.weight", 0, 4, v);
  const float pinned[4] = {0.00138382229f, -0.0111921523f, -0.00944625214f, 0.0102190366f};
  for (int i = 0; i < 4; ++i) CHECK(v[i] == pinned[i]);
  float tail[2];
  synthetic::generate_values(1, "model.embed_tokens.weight", 2, 2, tail);  // random access
  CHECK(tail[0] == v[2]);
  CHECK(tail[1] == v[3]);
  float norm[2];
  synthetic::generate_values(1, "model.layers.0.input_layernorm.weight", 0, 2, norm);
  const float pinned_norm[2] = {0.952512383f, 1.00595582f};
  CHECK(norm[0] == pinned_norm[0]);
  CHECK(norm[1] == pinned_norm[1]);
}

TEST_CASE("synthetic: weights are about N(0, 0.02) and norms about 1 + N(0, 0.05)", "[synthetic]") {
  std::vector<float> v(1 << 18);
  auto moments = [&](const std::string& name, double& mean, double& sd, float& amax) {
    synthetic::generate_values(3, name, 0, v.size(), v.data());
    double s = 0, s2 = 0;
    amax = 0;
    for (float x : v) {
      s += x;
      s2 += double(x) * x;
    }
    mean = s / v.size();
    sd = std::sqrt(s2 / v.size() - mean * mean);
    for (float x : v) amax = std::max(amax, std::fabs(x - float(mean)));
  };
  double mean, sd;
  float amax;
  moments("model.layers.3.mlp.down_proj.weight", mean, sd, amax);
  CHECK(std::fabs(mean) < 2e-4);
  CHECK(sd == Approx(0.02).epsilon(0.01));
  CHECK(amax < 0.0700f);  // Irwin-Hall(4) is bounded at sqrt(12) sd
  moments("model.layers.3.self_attn.q_norm.weight", mean, sd, amax);
  CHECK(mean == Approx(1.0).epsilon(1e-3));
  CHECK(sd == Approx(0.05).epsilon(0.01));
}

TEST_CASE("synthetic: presets carry the official shapes and the default model is small with the real vocabulary", "[synthetic]") {
  const ModelConfig d = synthetic::preset_config("default");
  CHECK(d.vocab_size == 151936);
  CHECK(d.shared_classifier);
  const ModelConfig a = synthetic::preset_config("qwen3-0.6b");
  CHECK(a.dim == 1024);
  CHECK(a.hidden_dim == 3072);
  CHECK(a.n_layers == 28);
  CHECK(a.q_dim() == 2048);
  const ModelConfig m = synthetic::preset_config("qwen3-30b-a3b");
  CHECK(m.is_moe());
  CHECK(m.num_experts == 128);
  CHECK(m.num_experts_per_tok == 8);
  CHECK(m.hidden_dim == 768);
  CHECK_FALSE(synthetic::preset_config("qwen3-8b").shared_classifier);
  CHECK_THROWS_WITH(synthetic::preset_config("qwen9"), Catch::Contains("unknown preset 'qwen9'") && Catch::Contains("qwen3-0.6b"));

  const auto root = convert_scratch("synthetic-default");
  WriterOptions w;
  w.config = d;
  synthetic::write_model_file((root / "default.ajc1").string(), w, 1);
  auto f = ModelFile::open((root / "default.ajc1").string());
  CHECK(f->file_size() < 40u * 1000 * 1000);
  CHECK(f->config().vocab_size == 151936);
}
