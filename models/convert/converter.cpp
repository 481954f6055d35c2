#include "models/convert/converter.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "common/paths.h"
#include "common/progress.h"
#include "models/convert/tensor_source.h"
#include "models/formats/model_writer.h"
#include "models/hf/checkpoint.h"
#include "models/hf/hf_config.h"

namespace qt::convert {

namespace fs = std::filesystem;

WeightType parse_expert_type(const std::string& name) {
  if (const auto t = quantized_type_by_option_name(name)) return *t;
  throw Error("--expert-type: unknown type '" + name + "' (expected q8_0, int8-sym, int8-asym or awq)");
}

namespace {

// The writer options implied by the checkpoint and the user's choices.
WriterOptions writer_options(const ConvertOptions& o, const hf::HfModelConfig& hc, const TensorSource& src,
                             const std::string& dir) {
  WriterOptions w;
  w.format = o.format;
  w.config = hc.config;
  const bool moe = hc.config.is_moe();
  if (o.format == FileFormat::MOE3 && !moe)
    fail_file(dir, "a dense Qwen3 checkpoint cannot be written as moe3; use --format ajc1 or ak48");
  if (o.format != FileFormat::MOE3 && moe)
    fail_file(dir, std::string("a Qwen3-MoE checkpoint can only be written as moe3, not ") + file_format_name(o.format));
  if (o.expert_type && o.format != FileFormat::MOE3) throw Error("--expert-type only applies to --format moe3");
  if (o.expert_group_size && o.format != FileFormat::MOE3) throw Error("--expert-group-size only applies to --format moe3");

  if (o.format == FileFormat::AK48) w.config.group_size = o.group_size ? o.group_size : hc.awq_group_size.value_or(0);
  else w.config.group_size = o.group_size;
  if (moe) {
    w.expert_type = o.expert_type.value_or(WeightType::Q8_0);
    w.expert_group_size = o.expert_group_size;
    if (!w.expert_group_size && w.expert_type == WeightType::AWQ_INT4 && hc.awq_group_size)
      w.expert_group_size = *hc.awq_group_size;
  }

  // qwen3.c marks the classifier shared when lm_head equals the embedding (torch.equal), which covers tied
  // checkpoints with or without a stored lm_head.weight.
  if (!hc.tie_word_embeddings) {
    if (!src.has("lm_head.weight"))
      fail_file(dir, "tensor 'lm_head.weight' not found and config.json has tie_word_embeddings = false");
    w.config.shared_classifier = src.same_values("lm_head.weight", "model.embed_tokens.weight");
  } else {
    w.config.shared_classifier = true;
  }
  return w;
}

// An --out that is (or links to) a file of the checkpoint folder would be truncated while the converter reads
// it: the checkpoint would be lost and the output garbage. Writing a new file into that folder is fine.
void refuse_output_inside_input(const std::string& hf_dir, const std::string& out_path) {
  std::error_code ec;
  std::vector<std::string> inputs;
  for (const fs::directory_entry& e : fs::directory_iterator(hf_dir, ec)) inputs.push_back(e.path().string());
  if (const std::string why = overwrites_input(out_path, inputs); !why.empty())
    fail_file(out_path, "--out is a file of the input checkpoint: " + why);
}

// A checkpoint with more layers than config.json's num_hidden_layers (a config cut down by hand, or the wrong
// config beside the shards) would convert into a model silently missing its last layers.
void refuse_layers_past_config(const hf::HfCheckpoint& ckpt, int n_layers) {
  const std::string prefix = "model.layers.";
  int highest = -1;
  std::string example;
  for (const auto& file : ckpt.files())
    for (const auto& [name, info] : file->tensors()) {
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const size_t end = name.find('.', prefix.size());
      const std::string digits = name.substr(prefix.size(), end == std::string::npos ? end : end - prefix.size());
      if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const int layer = std::stoi(digits);
      if (layer >= n_layers && layer > highest) highest = layer, example = name;
    }
  if (highest >= 0)
    fail_file(ckpt.config_path(), "num_hidden_layers = " + std::to_string(n_layers) + ", but the checkpoint holds layer " +
              std::to_string(highest) + " ('" + example + "'): converting would drop layers " + std::to_string(n_layers) +
              ".." + std::to_string(highest) + " without a word; fix config.json or the checkpoint");
}

void copy_tokenizer_files(const std::string& hf_dir, const std::string& out_path, ConvertResult& result) {
  std::error_code ec;
  fs::path out_dir = fs::absolute(out_path, ec).parent_path();
  if (fs::equivalent(fs::path(hf_dir), out_dir, ec)) return;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::path from = fs::path(hf_dir) / name;
    if (!fs::is_regular_file(from, ec)) continue;
    fs::path to = out_dir / name;
    // A read-only source (a packaged tokenizer) must not leave a read-only copy that the next run cannot replace.
    fs::remove(to, ec);
    fs::copy_file(from, to, ec);
    if (!ec) fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add, ec);
    if (ec) fail_file(to.string(), "cannot copy " + from.string() + ": " + ec.message(), kExitFailure);
    result.copied_files.push_back(to.string());
  }
}

}  // namespace

ConvertResult convert_checkpoint(const ConvertOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  refuse_output_inside_input(o.hf_dir, o.out_path);
  hf::HfCheckpoint ckpt(o.hf_dir);
  const hf::HfModelConfig hc = hf::load_hf_config(ckpt.config_path());
  refuse_layers_past_config(ckpt, hc.config.n_layers);
  TensorSource src(ckpt, hc);
  const WriterOptions wopt = writer_options(o, hc, src, o.hf_dir);

  auto writer = ModelWriter::create(o.out_path, wopt);
  const auto& plan = writer->plan();
  ConvertResult result;
  result.slots = static_cast<int64_t>(plan.size());

  uint64_t total_elems = 0;
  for (const auto& s : plan) total_elems += static_cast<uint64_t>(s.rows * s.cols);
  Progress progress("qconvert", static_cast<double>(total_elems) / 1e6, "M weights", o.quiet);
  uint64_t done_elems = 0;

  // One range of rows at a time (o.chunk_floats): the buffer and the writer's encoded copy stay a few
  // tens of MB even for a 151936-row embedding.
  std::vector<float> buffer;
  for (const TensorSlot& slot : plan) {
    AwqPacked packed;
    if (slot.type == WeightType::AWQ_INT4 && src.read_awq(slot.hf_name, slot.rows, slot.cols, slot.group_size, packed)) {
      writer->write_awq(slot, packed.qweight.data(), packed.qzeros.data(), packed.scales.data());
      ++result.awq_passthrough;
      done_elems += static_cast<uint64_t>(slot.rows * slot.cols);
      progress.update(static_cast<double>(done_elems) / 1e6, slot.hf_name);
      continue;
    }
    const int64_t step = chunk_rows(slot, o.chunk_floats);
    buffer.resize(static_cast<size_t>(step * slot.cols));
    for (int64_t row = 0; row < slot.rows; row += step) {
      const int64_t count = std::min(step, slot.rows - row);
      src.read_float_rows(slot.hf_name, slot.rows, slot.cols, row, count, buffer.data());
      writer->write_float_rows(slot, row, count, buffer.data());
      done_elems += static_cast<uint64_t>(count * slot.cols);
      progress.update(static_cast<double>(done_elems) / 1e6, slot.hf_name);
    }
  }
  writer->finish();
  progress.finish();

  if (o.copy_tokenizer) copy_tokenizer_files(o.hf_dir, o.out_path, result);
  std::error_code ec;
  result.output_bytes = fs::file_size(o.out_path, ec);
  result.input_bytes = src.bytes_read();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace qt::convert
