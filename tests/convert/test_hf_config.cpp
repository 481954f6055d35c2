// config.json -> ModelConfig: the official Qwen3 configs, transformers' defaults, and clear rejections.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "models/hf/hf_config.h"

using namespace qt;
using json = nlohmann::json;

namespace {

// Qwen3-0.6B's config.json.
json qwen3_06b() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

json qwen3_30b_a3b() {
  return json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
    "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "use_sliding_window": false, "sliding_window": null, "vocab_size": 151936})");
}

std::string reject(const json& j) {
  try {
    hf::parse_hf_config(j, "cfg.json");
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitBadInput);
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("hf config: Qwen3-0.6B and Qwen3-30B-A3B map to their ModelConfig", "[hf_config]") {
  const auto dense = hf::parse_hf_config(qwen3_06b(), "cfg.json");
  const ModelConfig& c = dense.config;
  CHECK(c.arch == ModelArch::Qwen3Dense);
  CHECK(c.dim == 1024);
  CHECK(c.hidden_dim == 3072);
  CHECK(c.n_layers == 28);
  CHECK(c.n_heads == 16);
  CHECK(c.n_kv_heads == 8);
  CHECK(c.head_dim == 128);
  CHECK(c.q_dim() == 2048);
  CHECK(c.vocab_size == 151936);
  CHECK(c.max_seq_len == 40960);
  CHECK(c.shared_classifier);
  CHECK(dense.tie_word_embeddings);
  CHECK(c.rope_theta == 1e6f);
  CHECK(c.rms_norm_eps == 1e-6f);
  CHECK(c.group_size == 0);
  CHECK_FALSE(dense.awq_group_size);
  CHECK(dense.torch_dtype == "bfloat16");
  CHECK(dense.bos_token_id == 151643);
  CHECK(dense.eos_token_id == 151645);

  const auto moe = hf::parse_hf_config(qwen3_30b_a3b(), "cfg.json");
  CHECK(moe.config.arch == ModelArch::Qwen3Moe);
  CHECK(moe.config.hidden_dim == 768);  // moe_intermediate_size, not the unused intermediate_size
  CHECK(moe.config.num_experts == 128);
  CHECK(moe.config.num_experts_per_tok == 8);
  CHECK(moe.config.norm_topk_prob);
  CHECK(moe.config.n_kv_heads == 4);
  CHECK_FALSE(moe.config.shared_classifier);
}

TEST_CASE("hf config: absent optional fields take transformers' defaults", "[hf_config]") {
  json j = qwen3_06b();
  for (const char* k : {"head_dim", "num_key_value_heads", "max_position_embeddings", "tie_word_embeddings",
                        "rope_theta", "rms_norm_eps", "architectures"})
    j.erase(k);
  j["num_attention_heads"] = 32;  // so that Qwen3Config's default of 32 KV heads is a valid grouping
  const auto d = hf::parse_hf_config(j, "cfg.json");  // model_type "qwen3" identifies the architecture
  // Qwen3Config(hidden_size=1024, num_attention_heads=32) in transformers 5.23: head_dim 128, 32 KV heads.
  CHECK(d.config.head_dim == 128);
  CHECK(d.config.n_kv_heads == 32);
  CHECK(d.config.max_seq_len == 32768);
  CHECK_FALSE(d.config.shared_classifier);
  CHECK(d.config.rope_theta == 10000.0f);
  CHECK(d.config.rms_norm_eps == 1e-6f);

  // transformers v5 keeps rope_theta in rope_parameters.
  json v5 = qwen3_06b();
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000000.0}};
  CHECK(hf::parse_hf_config(v5, "cfg.json").config.rope_theta == 5e6f);

  json m = qwen3_30b_a3b();
  for (const char* k : {"num_experts_per_tok", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "head_dim",
                        "num_key_value_heads"})
    m.erase(k);
  const auto moe = hf::parse_hf_config(m, "cfg.json");
  CHECK(moe.config.head_dim == 2048 / 32);  // Qwen3MoeConfig has no head_dim; attention uses hidden / heads
  CHECK(moe.config.n_kv_heads == 4);
  CHECK(moe.config.num_experts_per_tok == 8);
  CHECK_FALSE(moe.config.norm_topk_prob);  // Qwen3MoeConfig's class default
}

TEST_CASE("hf config: AutoAWQ quantization_config is read and other schemes are rejected", "[hf_config]") {
  json j = qwen3_06b();
  j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 64}, {"zero_point", true}, {"version", "GEMM"}};
  CHECK(hf::parse_hf_config(j, "cfg.json").awq_group_size == 64);
  j["quantization_config"] = {{"quant_method", "awq"}, {"w_bit", 4}, {"q_group_size", 32}, {"zero_point", true}, {"version", "gemm"}};
  CHECK(hf::parse_hf_config(j, "cfg.json").awq_group_size == 32);

  const std::vector<std::pair<json, std::string>> bad = {
      {{{"quant_method", "gptq"}, {"bits", 4}}, "quant_method \"gptq\" is not supported"},
      {{{"quant_method", "awq"}, {"bits", 8}, {"group_size", 128}}, "bits = 8"},
      {{{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", false}}, "zero_point = false"},
      {{{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}}, "version \"gemv\""},
      {{{"quant_method", "awq"}, {"bits", 4}, {"group_size", -1}}, "group_size = -1"},
  };
  for (const auto& [q, expect] : bad) {
    json k = qwen3_06b();
    k["quantization_config"] = q;
    const std::string msg = reject(k);
    CHECK_THAT(msg, Catch::StartsWith("cfg.json: quantization_config") && Catch::Contains(expect));
  }
}

TEST_CASE("hf config: unsupported models are rejected with a message naming the field", "[hf_config]") {
  auto with = [](json j, const std::string& key, json value) {
    if (value.is_null() && key.front() == '-') j.erase(key.substr(1));
    else j[key] = value;
    return j;
  };
  const json d = qwen3_06b(), m = qwen3_30b_a3b();
  CHECK_THAT(reject(with(d, "architectures", {"LlamaForCausalLM"})), Catch::Contains("'LlamaForCausalLM' is not supported"));
  CHECK_THAT(reject(with(d, "-hidden_size", nullptr)), Catch::Contains("missing required field \"hidden_size\""));
  CHECK_THAT(reject(with(d, "hidden_size", "1024")), Catch::Contains("\"hidden_size\" must be an integer"));
  CHECK_THAT(reject(with(d, "num_hidden_layers", -3)), Catch::Contains("out of range"));
  CHECK_THAT(reject(with(d, "attention_bias", true)), Catch::Contains("attention_bias"));
  CHECK_THAT(reject(with(d, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})), Catch::Contains("rope_scaling"));
  CHECK_THAT(reject(with(with(d, "use_sliding_window", true), "sliding_window", 4096)), Catch::Contains("use_sliding_window"));
  CHECK_THAT(reject(with(d, "num_key_value_heads", 3)), Catch::Contains("n_kv_heads"));
  CHECK_THAT(reject(with(d, "rms_norm_eps", 0)), Catch::Contains("rms_norm_eps"));
  CHECK_THAT(reject(with(m, "mlp_only_layers", {0, 5})), Catch::Contains("layer 0 is a dense MLP layer") && Catch::Contains("[0,5]"));
  CHECK_THAT(reject(with(m, "decoder_sparse_step", 2)), Catch::Contains("layer 0 is a dense MLP layer") && Catch::Contains("decoder_sparse_step = 2"));
  CHECK_THAT(reject(with(m, "num_experts_per_tok", 200)), Catch::Contains("num_experts_per_tok"));
  CHECK_THAT(reject(with(m, "num_experts", 0)), Catch::Contains("num_experts = 0"));
  CHECK_THAT(reject(json::array()), Catch::Contains("not a JSON object"));
}

TEST_CASE("hf config: a synthetic checkpoint's config.json parses back to the same shape", "[hf_config]") {
  const ModelConfig want = hf::parse_hf_config(qwen3_30b_a3b(), "cfg.json").config;
  const json written = hf::make_hf_config(want, "bfloat16", 64);
  CHECK(written["rms_norm_eps"].dump() == "1e-06");
  const auto back = hf::parse_hf_config(written, "written.json");
  CHECK(back.config.dim == want.dim);
  CHECK(back.config.hidden_dim == want.hidden_dim);
  CHECK(back.config.num_experts == want.num_experts);
  CHECK(back.config.norm_topk_prob == want.norm_topk_prob);
  CHECK(back.config.rope_theta == want.rope_theta);
  CHECK(back.config.rms_norm_eps == want.rms_norm_eps);
  CHECK(back.awq_group_size == 64);
}
