#include "models/hf/hf_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::hf {

namespace {

using json = nlohmann::json;

struct Reader {
  const json& j;
  const std::string& source;

  [[noreturn]] void fail(const std::string& msg) const { fail_file(source, msg); }

  bool present(const char* key) const { return j.contains(key) && !j[key].is_null(); }

  int32_t int_field(const char* key, std::optional<int32_t> fallback = std::nullopt) const {
    if (!present(key)) {
      if (fallback) return *fallback;
      fail(std::string("missing required field \"") + key + "\"");
    }
    const json& v = j[key];
    if (!v.is_number_integer())
      fail(std::string("field \"") + key + "\" must be an integer, got " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<int32_t>::max())
      fail(std::string("field \"") + key + "\" = " + std::to_string(x) + " is out of range");
    return static_cast<int32_t>(x);
  }

  double number_field(const json& obj, const char* key, double fallback) const {
    if (!obj.contains(key) || obj[key].is_null()) return fallback;
    const json& v = obj[key];
    if (!v.is_number()) fail(std::string("field \"") + key + "\" must be a number, got " + v.dump());
    double x = v.get<double>();
    if (!std::isfinite(x) || x <= 0) fail(std::string("field \"") + key + "\" = " + v.dump() + " must be positive");
    return x;
  }

  bool bool_field(const char* key, bool fallback) const {
    if (!present(key)) return fallback;
    if (!j[key].is_boolean()) fail(std::string("field \"") + key + "\" must be true or false, got " + j[key].dump());
    return j[key].get<bool>();
  }
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int32_t parse_awq(const json& q, const std::string& source) {
  auto fail = [&](const std::string& m) { fail_file(source, "quantization_config: " + m); };
  if (!q.is_object()) fail("not a JSON object");
  const std::string method = q.contains("quant_method") && q["quant_method"].is_string()
                                 ? lower(q["quant_method"].get<std::string>()) : "";
  if (method != "awq")
    fail("quant_method " + (q.contains("quant_method") ? q["quant_method"].dump() : std::string("(missing)")) +
         " is not supported; only AutoAWQ (\"awq\") checkpoints can be converted");
  auto get_int = [&](std::initializer_list<const char*> keys, std::optional<int64_t> fallback) -> int64_t {
    for (const char* k : keys)
      if (q.contains(k) && !q[k].is_null()) {
        if (!q[k].is_number_integer()) fail(std::string(k) + " must be an integer, got " + q[k].dump());
        return q[k].get<int64_t>();
      }
    if (!fallback) fail(std::string("missing ") + *keys.begin());
    return *fallback;
  };
  const int64_t bits = get_int({"bits", "w_bit"}, std::nullopt);
  if (bits != 4) fail("bits = " + std::to_string(bits) + " is not supported; AWQ checkpoints must be 4-bit");
  const int64_t group = get_int({"group_size", "q_group_size"}, 128);
  if (group <= 0 || group % 8 != 0 || group > (1 << 20))
    fail("group_size = " + std::to_string(group) + " is not supported (positive multiple of 8; -1 per-channel is not)");
  const bool zero_point = q.contains("zero_point") && q["zero_point"].is_boolean() ? q["zero_point"].get<bool>() : true;
  if (!zero_point) fail("zero_point = false is not supported; AWQ INT4 here always carries zero points");
  const std::string version = q.contains("version") && q["version"].is_string() ? lower(q["version"].get<std::string>()) : "gemm";
  if (version != "gemm")
    fail("version \"" + version + "\" is not supported; only the GEMM packing (\"gemm\") is");
  return static_cast<int32_t>(group);
}

}  // namespace

HfModelConfig parse_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) fail_file(source, "config.json is not a JSON object");
  Reader r{j, source};
  HfModelConfig out;
  ModelConfig& c = out.config;

  std::string arch;
  if (r.present("architectures")) {
    if (!j["architectures"].is_array() || j["architectures"].empty() || !j["architectures"][0].is_string())
      r.fail("\"architectures\" must be a non-empty array of strings");
    arch = j["architectures"][0].get<std::string>();
  } else if (r.present("model_type") && j["model_type"].is_string()) {
    const std::string mt = j["model_type"].get<std::string>();
    arch = mt == "qwen3" ? "Qwen3ForCausalLM" : mt == "qwen3_moe" ? "Qwen3MoeForCausalLM" : mt;
  }
  if (arch == "Qwen3ForCausalLM") c.arch = ModelArch::Qwen3Dense;
  else if (arch == "Qwen3MoeForCausalLM") c.arch = ModelArch::Qwen3Moe;
  else r.fail("architecture '" + (arch.empty() ? std::string("(none)") : arch) +
              "' is not supported; expected Qwen3ForCausalLM or Qwen3MoeForCausalLM");

  c.dim = r.int_field("hidden_size");
  c.n_layers = r.int_field("num_hidden_layers");
  c.n_heads = r.int_field("num_attention_heads");
  c.vocab_size = r.int_field("vocab_size");
  // transformers' own defaults: Qwen3Config has num_key_value_heads 32 and head_dim 128; Qwen3MoeConfig
  // has num_key_value_heads 4 and no head_dim (its attention falls back to hidden_size / heads).
  const bool moe = c.arch == ModelArch::Qwen3Moe;
  c.n_kv_heads = r.int_field("num_key_value_heads", moe ? 4 : 32);
  if (c.n_heads <= 0) r.fail("num_attention_heads must be positive");
  c.head_dim = r.int_field("head_dim", moe ? c.dim / c.n_heads : 128);
  c.max_seq_len = r.int_field("max_position_embeddings", 32768);
  out.tie_word_embeddings = r.bool_field("tie_word_embeddings", false);
  c.shared_classifier = out.tie_word_embeddings;
  c.rms_norm_eps = static_cast<float>(r.number_field(j, "rms_norm_eps", 1e-6));
  // transformers v5 moved rope_theta into rope_parameters.
  double theta = r.number_field(j, "rope_theta", 10000.0);
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"].is_string() && rp["rope_type"] != "default")
      r.fail("rope_parameters.rope_type \"" + rp["rope_type"].get<std::string>() + "\" is not supported (only default RoPE)");
    theta = r.number_field(rp, "rope_theta", theta);
  }
  c.rope_theta = static_cast<float>(theta);
  if (r.present("rope_scaling")) {
    const json& rs = j["rope_scaling"];
    const std::string type = rs.is_object() && rs.contains("rope_type") && rs["rope_type"].is_string() ? rs["rope_type"].get<std::string>()
                           : rs.is_object() && rs.contains("type") && rs["type"].is_string() ? rs["type"].get<std::string>() : "?";
    if (type != "default") r.fail("rope_scaling " + rs.dump() + " is not supported (only default RoPE)");
  }
  if (r.bool_field("attention_bias", false)) r.fail("attention_bias = true is not supported (the formats carry no biases)");
  if (r.bool_field("use_sliding_window", false) && r.present("sliding_window"))
    r.fail("use_sliding_window = true is not supported (every layer must use full causal attention)");
  if (r.present("hidden_act") && j["hidden_act"] != "silu")
    r.fail("hidden_act " + j["hidden_act"].dump() + " is not supported (Qwen3 uses silu)");

  if (c.arch == ModelArch::Qwen3Dense) {
    c.hidden_dim = r.int_field("intermediate_size");
  } else {
    c.hidden_dim = r.int_field("moe_intermediate_size");
    c.num_experts = r.int_field("num_experts");
    c.num_experts_per_tok = r.int_field("num_experts_per_tok", 8);
    c.norm_topk_prob = r.bool_field("norm_topk_prob", false);
    const int32_t step = r.int_field("decoder_sparse_step", 1);
    std::set<int64_t> mlp_only;
    if (r.present("mlp_only_layers")) {
      if (!j["mlp_only_layers"].is_array()) r.fail("mlp_only_layers must be an array of layer indices");
      for (const auto& v : j["mlp_only_layers"]) {
        if (!v.is_number_integer()) r.fail("mlp_only_layers must be an array of layer indices, got " + j["mlp_only_layers"].dump());
        mlp_only.insert(v.get<int64_t>());
      }
    }
    if (c.num_experts == 0) r.fail("num_experts = 0: no layer would be MoE; convert it as a dense Qwen3 model");
    if (step <= 0) r.fail("decoder_sparse_step = " + std::to_string(step) + " must be positive");
    for (int32_t l = 0; l < c.n_layers; ++l) {
      if (mlp_only.count(l) || (l + 1) % step != 0)
        r.fail("layer " + std::to_string(l) + " is a dense MLP layer (decoder_sparse_step = " + std::to_string(step) +
               ", mlp_only_layers = " + (r.present("mlp_only_layers") ? j["mlp_only_layers"].dump() : std::string("[]")) +
               "); moe3 needs every layer to be MoE");
    }
  }

  if (r.present("quantization_config")) out.awq_group_size = parse_awq(j["quantization_config"], source);
  if (r.present("torch_dtype") && j["torch_dtype"].is_string()) out.torch_dtype = j["torch_dtype"].get<std::string>();
  else if (r.present("dtype") && j["dtype"].is_string()) out.torch_dtype = j["dtype"].get<std::string>();
  for (auto [key, field] : {std::pair{"bos_token_id", &out.bos_token_id}, std::pair{"eos_token_id", &out.eos_token_id}})
    if (r.present(key) && j[key].is_number_integer() && j[key].get<int64_t>() >= 0) *field = j[key].get<int64_t>();
  // The group size belongs to the output format; validate everything else.
  ModelConfig check = c;
  check.group_size = out.awq_group_size.value_or(1);
  validate_config(check, source);
  return out;
}

HfModelConfig load_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_file(path, "cannot open config.json");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) fail_file(path, "not valid JSON");
  return parse_hf_config(j, path);
}

// The shortest decimal that reads back as the same float, so 1e-6f is written as 1e-06, not 9.99999997e-07.
double float_for_json(float f) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

json make_hf_config(const ModelConfig& c, const std::string& torch_dtype, std::optional<int32_t> awq_group_size) {
  json j;
  const bool moe = c.is_moe();
  j["architectures"] = {moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"};
  j["model_type"] = moe ? "qwen3_moe" : "qwen3";
  j["hidden_size"] = c.dim;
  j["intermediate_size"] = moe ? c.hidden_dim * c.num_experts_per_tok : c.hidden_dim;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_seq_len;
  j["tie_word_embeddings"] = c.shared_classifier;
  j["rope_theta"] = float_for_json(c.rope_theta);
  j["rope_scaling"] = nullptr;
  j["rms_norm_eps"] = float_for_json(c.rms_norm_eps);
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["bos_token_id"] = 151643;
  j["eos_token_id"] = 151645;
  j["torch_dtype"] = torch_dtype;
  if (moe) {
    j["moe_intermediate_size"] = c.hidden_dim;
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = json::array();
  }
  if (awq_group_size) {
    j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4},         {"group_size", *awq_group_size},
                                {"zero_point", true},    {"version", "gemm"}, {"modules_to_not_convert", nullptr}};
  }
  return j;
}

}  // namespace qt::hf
