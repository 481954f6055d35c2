#pragma once
// Readers for the committed goldens in tests/tokenizer/data/ and a shared, loaded-once tokenizer.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"

namespace qt::tok::test {

struct CorpusDoc {
  std::string text;
  std::string expected_decode;  // HF decode(ids); equals text unless the file says otherwise
  std::vector<int32_t> ids;
};

std::string data_path(const std::string& name);
std::string tokenizer_dir();
const Tokenizer& qwen3();  // the in-tree Qwen3 tokenizer, loaded once per test process
const std::vector<CorpusDoc>& corpus();  // encode_corpus.bin
nlohmann::json load_json(const std::string& name);
std::string read_file(const std::string& path);
std::vector<uint8_t> from_hex(const std::string& hex);

}  // namespace qt::tok::test
