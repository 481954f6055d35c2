#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/progress.h"
#include "models/hf/hf_config.h"
#include "models/hf/safetensors_writer.h"
#include "models/quant/awq_int4.h"
#include "models/synthetic/random_weights.h"
#include "models/synthetic/synthetic.h"

namespace qt::synthetic {

namespace fs = std::filesystem;
using hf::DType;

HfDType parse_hf_dtype(const std::string& name) {
  if (name == "f32") return HfDType::F32;
  if (name == "f16") return HfDType::F16;
  if (name == "bf16") return HfDType::BF16;
  throw Error("--dtype: unknown type '" + name + "' (expected f32, f16 or bf16)");
}

std::vector<HfWeight> hf_weights(const ModelConfig& c) {
  std::vector<HfWeight> w;
  w.push_back({"model.embed_tokens.weight", c.vocab_size, c.dim, false});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.push_back({p + "input_layernorm.weight", 1, c.dim, false});
    w.push_back({p + "self_attn.q_proj.weight", c.q_dim(), c.dim, true});
    w.push_back({p + "self_attn.k_proj.weight", c.kv_dim(), c.dim, true});
    w.push_back({p + "self_attn.v_proj.weight", c.kv_dim(), c.dim, true});
    w.push_back({p + "self_attn.o_proj.weight", c.dim, c.q_dim(), true});
    w.push_back({p + "self_attn.q_norm.weight", 1, c.head_dim, false});
    w.push_back({p + "self_attn.k_norm.weight", 1, c.head_dim, false});
    w.push_back({p + "post_attention_layernorm.weight", 1, c.dim, false});
    if (!c.is_moe()) {
      w.push_back({p + "mlp.gate_proj.weight", c.hidden_dim, c.dim, true});
      w.push_back({p + "mlp.up_proj.weight", c.hidden_dim, c.dim, true});
      w.push_back({p + "mlp.down_proj.weight", c.dim, c.hidden_dim, true});
    } else {
      w.push_back({p + "mlp.gate.weight", c.num_experts, c.dim, false});
      for (int32_t e = 0; e < c.num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        w.push_back({x + "gate_proj.weight", c.hidden_dim, c.dim, true});
        w.push_back({x + "up_proj.weight", c.hidden_dim, c.dim, true});
        w.push_back({x + "down_proj.weight", c.dim, c.hidden_dim, true});
      }
    }
  }
  w.push_back({"model.norm.weight", 1, c.dim, false});
  if (!c.shared_classifier) w.push_back({"lm_head.weight", c.vocab_size, c.dim, false});
  return w;
}

namespace {

// One stored safetensors tensor and how its bytes are produced.
struct Item {
  enum Kind { kFloat, kFusedGateUp, kFusedDown, kAwqQweight, kAwqQzeros, kAwqScales } kind = kFloat;
  hf::TensorSpec spec;
  HfWeight weight;   // the logical weight (for fused items: expert 0's gate/down, used for the shape)
  std::string layer_prefix;  // fused items: "model.layers.{l}.mlp.experts."
};

std::vector<Item> plan_items(const ModelConfig& c, const HfWriteOptions& o) {
  const DType float_type = o.awq_group_size ? DType::F16
                           : o.dtype == HfDType::F32 ? DType::F32
                           : o.dtype == HfDType::F16 ? DType::F16 : DType::BF16;
  if (o.awq_group_size && o.fused_experts) throw Error("synthetic: fused experts cannot be combined with AWQ packing");
  std::vector<Item> items;
  for (const HfWeight& w : hf_weights(c)) {
    const std::vector<int64_t> shape = w.rows == 1 ? std::vector<int64_t>{w.cols} : std::vector<int64_t>{w.rows, w.cols};
    const auto experts = w.name.find(".mlp.experts.");
    if (o.fused_experts && experts != std::string::npos) {
      const std::string prefix = w.name.substr(0, experts + 13);
      const bool first_expert = w.name.compare(experts + 13, 2, "0.") == 0;
      if (!first_expert || w.name.find("up_proj") != std::string::npos) continue;
      Item it;
      it.weight = w;
      it.layer_prefix = prefix;
      if (w.name.find("gate_proj") != std::string::npos) {
        it.kind = Item::kFusedGateUp;
        it.spec = {prefix + "gate_up_proj", float_type, {c.num_experts, 2 * w.rows, w.cols}};
      } else {
        it.kind = Item::kFusedDown;
        it.spec = {prefix + "down_proj", float_type, {c.num_experts, w.rows, w.cols}};
      }
      items.push_back(it);
      continue;
    }
    if (o.awq_group_size && w.quantizable) {
      const int64_t G = *o.awq_group_size, N = w.rows, K = w.cols;
      if (N % 8 != 0 || K % G != 0)
        throw Error("synthetic: AWQ needs out % 8 == 0 and the group " + std::to_string(G) + " to divide in for '" +
                    w.name + "' [" + std::to_string(N) + ", " + std::to_string(K) + "]");
      const std::string module = w.name.substr(0, w.name.size() - 7);  // drop ".weight"
      items.push_back({Item::kAwqQweight, {module + ".qweight", DType::I32, {K, N / 8}}, w, ""});
      items.push_back({Item::kAwqQzeros, {module + ".qzeros", DType::I32, {K / G, N / 8}}, w, ""});
      items.push_back({Item::kAwqScales, {module + ".scales", DType::F16, {K / G, N}}, w, ""});
      continue;
    }
    items.push_back({Item::kFloat, {w.name, float_type, shape}, w, ""});
  }
  return items;
}

const char* torch_dtype_name(const HfWriteOptions& o) {
  if (o.awq_group_size) return "float16";
  return o.dtype == HfDType::F32 ? "float32" : o.dtype == HfDType::F16 ? "float16" : "bfloat16";
}

// Streams generated values of `name` [first, first + count) into the writer in bounded chunks.
void stream_values(hf::SafetensorsWriter& w, const std::string& stored, uint64_t seed, const std::string& name,
                   uint64_t count, std::vector<float>& chunk) {
  constexpr uint64_t kChunk = 1u << 20;
  chunk.resize(kChunk);
  for (uint64_t i = 0; i < count; i += kChunk) {
    const uint64_t n = std::min(kChunk, count - i);
    generate_values(seed, name, i, n, chunk.data());
    w.write_float(stored, chunk.data(), n);
  }
}

}  // namespace

void write_hf_checkpoint(const std::string& dir, const ModelConfig& c, uint64_t seed, const HfWriteOptions& o,
                         bool quiet) {
  ModelConfig check = c;
  check.group_size = o.awq_group_size.value_or(1);
  validate_config(check, dir);
  const std::vector<Item> items = plan_items(c, o);

  // Shards: consecutive items, each shard at most shard_bytes (a larger tensor gets a shard of its own).
  std::vector<std::vector<size_t>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t n = items[i].spec.nbytes();
    if (o.shard_bytes && !shards.back().empty() && in_shard + n > o.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += n;
    total += n;
  }

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_file(dir, "cannot create directory: " + ec.message(), kExitFailure);
  {
    std::ofstream cfg(dir + "/config.json");
    cfg << hf::make_hf_config(c, torch_dtype_name(o), o.awq_group_size).dump(2) << "\n";
    if (!cfg) fail_file(dir + "/config.json", "write failed", kExitFailure);
  }

  auto shard_name = [&](size_t s) {
    if (!o.shard_bytes) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    return std::string(buf);
  };
  // A single-file checkpoint has no index; remove a stale one from an earlier sharded run in the same folder.
  if (!o.shard_bytes) fs::remove(dir + "/model.safetensors.index.json", ec);

  Progress progress("synthetic", static_cast<double>(total) / 1e6, "MB", quiet);
  uint64_t done = 0;
  std::vector<float> chunk, full;
  std::vector<int32_t> qweight, qzeros;
  std::vector<uint16_t> scales;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<hf::TensorSpec> specs;
    for (size_t i : shards[s]) {
      specs.push_back(items[i].spec);
      weight_map[items[i].spec.name] = shard_name(s);
    }
    hf::SafetensorsWriter w(dir + "/" + shard_name(s), specs, {{"format", "pt"}});
    for (size_t i : shards[s]) {
      const Item& it = items[i];
      const HfWeight& wt = it.weight;
      const uint64_t per = static_cast<uint64_t>(wt.rows * wt.cols);
      switch (it.kind) {
        case Item::kFloat:
          stream_values(w, it.spec.name, seed, wt.name, per, chunk);
          break;
        case Item::kFusedGateUp:
          for (int32_t e = 0; e < c.num_experts; ++e) {
            const std::string x = it.layer_prefix + std::to_string(e) + ".";
            stream_values(w, it.spec.name, seed, x + "gate_proj.weight", per, chunk);
            stream_values(w, it.spec.name, seed, x + "up_proj.weight", per, chunk);
          }
          break;
        case Item::kFusedDown:
          for (int32_t e = 0; e < c.num_experts; ++e)
            stream_values(w, it.spec.name, seed, it.layer_prefix + std::to_string(e) + ".down_proj.weight", per, chunk);
          break;
        case Item::kAwqQweight: {
          const int32_t G = *o.awq_group_size;
          full.resize(per);
          generate_values(seed, wt.name, 0, per, full.data());
          qweight.resize(per / 8);
          qzeros.resize(per / 8 / G);
          scales.resize(per / G);
          quant::quantize_awq_int4(full.data(), wt.rows, wt.cols, G, qweight.data(), qzeros.data(), scales.data());
          w.write(it.spec.name, qweight.data(), qweight.size() * 4);
          break;
        }
        case Item::kAwqQzeros:
          w.write(it.spec.name, qzeros.data(), qzeros.size() * 4);
          break;
        case Item::kAwqScales:
          w.write(it.spec.name, scales.data(), scales.size() * 2);
          break;
      }
      done += it.spec.nbytes();
      progress.update(static_cast<double>(done) / 1e6, it.spec.name);
    }
    w.finish();
  }
  progress.finish();

  if (o.shard_bytes) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    std::ofstream out(dir + "/model.safetensors.index.json");
    out << index.dump(2) << "\n";
    if (!out) fail_file(dir + "/model.safetensors.index.json", "write failed", kExitFailure);
  } else {
    fs::remove(dir + "/model.safetensors.index.json", ec);
  }
}

}  // namespace qt::synthetic
