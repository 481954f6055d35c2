// Fuzz entries of the models layer: model files, safetensors, config.json, tokenizer.json, chat JSON.
#include <nlohmann/json.hpp>

#include "models/formats/header.h"
#include "models/formats/model_file.h"
#include "models/hf/hf_config.h"
#include "models/hf/safetensors_file.h"
#include "models/tokenizer/chat.h"
#include "models/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

namespace qt::fuzz {

using namespace detail;

void model_file(const uint8_t* data, size_t size) {
  expect_clean("model_file", [&] { formats::decode_header(data, size, "fuzz.bin"); });
  static const std::string path = scratch_path("model.bin");
  write_file(path, data, size);
  expect_clean("model_file", [&] {
    auto mf = ModelFile::open(path);
    (void)mf->describe().dump();
  });
}

void safetensors(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("model.safetensors");
  write_file(path, data, size);
  expect_clean("safetensors", [&] {
    hf::SafetensorsFile f(path);
    for (const auto& [name, t] : f.tensors()) {
      if (t.numel() == 0) continue;
      float first = 0;
      f.read_float(t, 0, 1, &first);
    }
  });
}

void hf_config(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(text_of(data, size), nullptr, false);
  if (j.is_discarded()) return;  // not JSON: load_hf_config's own check, nothing of ours to reach
  expect_clean("hf_config", [&] { hf::parse_hf_config(j, "config.json"); });
}

void tokenizer_json(const uint8_t* data, size_t size) {
  expect_clean("tokenizer_json", [&] {
    tok::Tokenizer t = tok::Tokenizer::from_json(text_of(data, size));
    auto ids = t.encode("Hello, 世界 <think>x</think> 123\n");
    (void)t.decode(ids);
  });
}

void chat_json(const uint8_t* data, size_t size) {
  expect_clean("chat_json", [&] {
    tok::Conversation c = tok::parse_conversation_json(text_of(data, size));
    tok::ChatOptions o;
    o.tools = c.tools;
    (void)tok::render_chat(c.messages, o);
  });
  expect_clean("chat_json", [&] { (void)tok::to_template_json(text_of(data, size)); });
}

}  // namespace qt::fuzz
