#include <cstdio>
#include <optional>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/progress.h"
#include "models/cli/commands.h"
#include "models/core/config_limits.h"
#include "models/convert/converter.h"
#include "models/hf/hf_config.h"
#include "models/tokenizer/qwen3c.h"
#include "models/tokenizer/tokenizer.h"

namespace qt::cli {

int cmd_convert(const std::vector<std::string>& args) {
  CliArgs a("qconvert convert", "Convert a Hugging Face Qwen3 / Qwen3-MoE checkpoint (fp32/fp16/bf16 or AutoAWQ INT4) to a model file.");
  a.option("--hf", "DIR", "checkpoint folder: config.json + model.safetensors or a sharded index")
      .option("--format", "FMT", "ajc1 (dense Q8_0), moe3 (MoE) or ak48 (dense AWQ INT4)")
      .option("--out", "FILE", "output model file")
      .option("--expert-type", "TYPE", "moe3 experts: q8_0, int8-sym, int8-asym or awq (default q8_0)")
      .option("--group-size", "G", "Q8_0 group (default: qwen3.c rule, 64 halved until it divides dim) or ak48 AWQ group (default: the checkpoint's, else 128 halved until it divides every in-dimension)")
      .range(limits::kGroupSizeRange)
      .option("--expert-group-size", "G", "moe3 expert group (default: the checkpoint's AWQ group for awq, else --group-size)")
      .range(limits::kGroupSizeRange)
      .flag("--no-tokenizer", "do not copy tokenizer.json / tokenizer_config.json next to the output nor write <out>.tokenizer")
      .flag("-q,--quiet", "no progress output");
  if (!a.parse(args)) return 0;
  convert::ConvertOptions o;
  o.hf_dir = a.get("--hf");
  o.out_path = a.get("--out");
  o.format = parse_file_format(a.get("--format"));
  if (a.given("--expert-type")) o.expert_type = convert::parse_expert_type(a.get("--expert-type"));
  o.group_size = a.given("--group-size") ? a.get_int_as<int32_t>("--group-size") : 0;
  o.expert_group_size = a.given("--expert-group-size") ? a.get_int_as<int32_t>("--expert-group-size") : 0;
  o.copy_tokenizer = !a.get_flag("--no-tokenizer");
  o.quiet = a.get_flag("--quiet");

  // The qwen3.c tokenizer file (<out>.tokenizer) is built from the checkpoint's tokenizer.json. It is loaded
  // before converting so a broken tokenizer fails fast, and written after the model succeeded.
  std::optional<tok::Tokenizer> tokenizer;
  const std::string tokenizer_json = o.hf_dir + "/tokenizer.json";
  if (o.copy_tokenizer && file_exists(tokenizer_json)) tokenizer.emplace(tok::Tokenizer::load(tokenizer_json));

  const convert::ConvertResult r = convert::convert_checkpoint(o);
  if (tokenizer) {
    const hf::HfModelConfig hc = hf::load_hf_config(o.hf_dir + "/config.json");
    tok::write_qwen3c_tokenizer(*tokenizer, o.out_path + ".tokenizer", hc.bos_token_id, hc.eos_token_id);
  }
  const double mb_in = static_cast<double>(r.input_bytes) / 1e6, mb_out = static_cast<double>(r.output_bytes) / 1e6;
  std::fprintf(stderr,
               "qconvert: wrote %s (%s, %.1f MB, %lld tensors, %lld AWQ passed through) from %.1f MB of safetensors "
               "in %.2f s (%.1f MB/s), peak RSS %.1f MB\n",
               o.out_path.c_str(), file_format_name(o.format), mb_out, static_cast<long long>(r.slots),
               static_cast<long long>(r.awq_passthrough), mb_in, r.seconds, r.seconds > 0 ? mb_in / r.seconds : 0.0,
               static_cast<double>(peak_rss_bytes()) / 1e6);
  return 0;
}

}  // namespace qt::cli
