#include <cctype>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/progress.h"
#include "models/cli/commands.h"
#include "models/convert/converter.h"
#include "models/core/config_limits.h"
#include "models/synthetic/presets.h"
#include "models/synthetic/synthetic.h"

namespace qt::cli {

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  uint64_t unit = 0;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "KB") unit = 1000;
  else if (suffix == "MB") unit = 1000 * 1000;
  else if (suffix == "GB") unit = 1000ull * 1000 * 1000;
  else if (suffix == "KiB") unit = 1024;
  else if (suffix == "MiB") unit = 1024 * 1024;
  else if (suffix == "GiB") unit = 1024ull * 1024 * 1024;
  if (digits == 0 || digits > 12 || unit == 0)
    throw Error(what + ": expected a size such as 500MB, 2GiB or 1048576, got '" + text + "'");
  const uint64_t count = std::stoull(text.substr(0, digits));
  // Twelve digits times GiB can pass 2^64; a wrapped size would silently shrink the model.
  if (count > std::numeric_limits<uint64_t>::max() / unit)
    throw Error(what + ": size '" + text + "' does not fit in 64 bits");
  return count * unit;
}

namespace {

bool bool_arg(const CliArgs& a, const std::string& name) {
  const std::string v = a.get(name);
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  throw Error(name + ": expected 0/1 or true/false, got '" + v + "'");
}

}  // namespace

int cmd_synthetic(const std::vector<std::string>& args) {
  std::string presets;
  for (const auto& n : synthetic::preset_names()) presets += (presets.empty() ? "" : ", ") + n;
  CliArgs a("qconvert synthetic",
            "Write a deterministic random-weight Qwen3 / Qwen3-MoE checkpoint: a model file, or a Hugging Face folder.");
  a.option("--preset", "NAME", "shape preset: " + presets, std::string("default"))
      .option("--format", "FMT", "ajc1, moe3, ak48, or hf (a Hugging Face folder)")
      .option("--out", "PATH", "output file (folder for --format hf)")
      .option("--seed", "S", "random seed; the same seed gives byte-identical output", std::string("1"))
      .range(flag_ranges::kSeed)
      .option("--layers", "N", "override num_hidden_layers").range(limits::kLayersRange)
      .option("--dim", "N", "override hidden_size").range(limits::kDimRange)
      .option("--hidden-dim", "N", "override intermediate_size (MoE: moe_intermediate_size)").range(limits::kHiddenDimRange)
      .option("--heads", "N", "override num_attention_heads").range(limits::kHeadsRange)
      .option("--kv-heads", "N", "override num_key_value_heads").range(limits::kHeadsRange)
      .option("--head-dim", "N", "override head_dim").range(limits::kHeadDimRange)
      .option("--vocab", "N", "override vocab_size").range(limits::kVocabRange)
      .option("--max-seq", "N", "override max_position_embeddings").range(limits::kSeqLenRange)
      .option("--experts", "N", "override num_experts (MoE presets)").range(limits::kExpertsRange)
      .option("--experts-per-tok", "N", "override num_experts_per_tok").range(limits::kExpertsRange)
      .option("--norm-topk-prob", "0|1", "override norm_topk_prob")
      .option("--tied", "0|1", "override tie_word_embeddings")
      .option("--rope-theta", "X", "override rope_theta").range(limits::kRopeThetaRange)
      .option("--rms-eps", "X", "override rms_norm_eps").range(limits::kRmsEpsRange)
      .option("--expert-type", "TYPE", "moe3 experts: q8_0, int8-sym, int8-asym or awq")
      .option("--group-size", "G", "model file: the format's group (see qconvert convert); hf awq: the AWQ group (default 128)")
      .range(limits::kGroupSizeRange)
      .option("--expert-group-size", "G", "moe3 expert group").range(limits::kGroupSizeRange)
      .option("--dtype", "T", "hf only: f32, f16, bf16, or awq (AutoAWQ INT4 linears, fp16 rest)", std::string("f32"))
      .option("--shard-size", "BYTES", "hf only: shard above this size (e.g. 500MB); default one file")
      .flag("--fused-experts", "hf only: store experts fused as mlp.experts.gate_up_proj / down_proj (transformers v5)")
      .flag("-q,--quiet", "no progress output");
  if (!a.parse(args)) return 0;

  ModelConfig c = synthetic::preset_config(a.get("--preset"));
  auto override = [&](const char* name, int32_t& field) {
    if (a.given(name)) field = a.get_int_as<int32_t>(name);
  };
  override("--layers", c.n_layers);
  override("--dim", c.dim);
  override("--hidden-dim", c.hidden_dim);
  override("--heads", c.n_heads);
  override("--kv-heads", c.n_kv_heads);
  override("--head-dim", c.head_dim);
  override("--vocab", c.vocab_size);
  override("--max-seq", c.max_seq_len);
  if (a.given("--experts") || a.given("--experts-per-tok") || a.given("--norm-topk-prob")) {
    if (!c.is_moe()) throw Error("--experts, --experts-per-tok and --norm-topk-prob need a MoE preset (e.g. tiny-moe, qwen3-30b-a3b)");
    override("--experts", c.num_experts);
    override("--experts-per-tok", c.num_experts_per_tok);
    if (a.given("--norm-topk-prob")) c.norm_topk_prob = bool_arg(a, "--norm-topk-prob");
  }
  if (a.given("--tied")) c.shared_classifier = bool_arg(a, "--tied");
  if (a.given("--rope-theta")) c.rope_theta = static_cast<float>(a.get_double("--rope-theta"));
  if (a.given("--rms-eps")) c.rms_norm_eps = static_cast<float>(a.get_double("--rms-eps"));
  const uint64_t seed = a.get_int_as<uint64_t>("--seed");
  const std::string out = a.get("--out");
  const std::string format = a.get("--format");
  const bool quiet = a.get_flag("--quiet");
  const int32_t group = a.given("--group-size") ? a.get_int_as<int32_t>("--group-size") : 0;

  if (format == "hf") {
    for (const char* moe_only : {"--expert-type", "--expert-group-size"})
      if (a.given(moe_only)) throw Error(std::string(moe_only) + " applies to model files, not --format hf");
    synthetic::HfWriteOptions o;
    const std::string dtype = a.get("--dtype");
    if (dtype == "awq") o.awq_group_size = group ? group : 128;
    else o.dtype = synthetic::parse_hf_dtype(dtype);
    if (a.given("--shard-size")) o.shard_bytes = parse_byte_size(a.get("--shard-size"), "--shard-size");
    o.fused_experts = a.get_flag("--fused-experts");
    if (o.fused_experts && !c.is_moe()) throw Error("--fused-experts needs a MoE preset");
    synthetic::write_hf_checkpoint(out, c, seed, o, quiet);
    std::fprintf(stderr, "qconvert: wrote Hugging Face checkpoint %s, peak RSS %.1f MB\n", out.c_str(),
                 static_cast<double>(peak_rss_bytes()) / 1e6);
    return 0;
  }

  for (const char* hf_only : {"--dtype", "--shard-size"})
    if (a.given(hf_only)) throw Error(std::string(hf_only) + " applies only to --format hf");
  if (a.get_flag("--fused-experts")) throw Error("--fused-experts applies only to --format hf");
  WriterOptions w;
  w.format = parse_file_format(format);
  if (w.format == FileFormat::MOE3 && !c.is_moe()) throw Error("--format moe3 needs a MoE preset (e.g. tiny-moe, qwen3-30b-a3b)");
  if (w.format != FileFormat::MOE3 && c.is_moe())
    throw Error(std::string("a MoE preset can only be written as moe3 or hf, not ") + format);
  w.config = c;
  w.config.group_size = group;
  if (a.given("--expert-type")) {
    if (w.format != FileFormat::MOE3) throw Error("--expert-type only applies to --format moe3");
    w.expert_type = convert::parse_expert_type(a.get("--expert-type"));
  }
  if (a.given("--expert-group-size")) w.expert_group_size = a.get_int_as<int32_t>("--expert-group-size");
  synthetic::write_model_file(out, w, seed, quiet);
  std::fprintf(stderr, "qconvert: wrote %s (%s), peak RSS %.1f MB\n", out.c_str(), format.c_str(),
               static_cast<double>(peak_rss_bytes()) / 1e6);
  return 0;
}

}  // namespace qt::cli
