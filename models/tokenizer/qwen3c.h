#pragma once
// The qwen3.c tokenizer file (`<model>.bin.tokenizer`, formats.md §2): little-endian uint32 max_token_length,
// uint32 bos_token_id, uint32 eos_token_id, then for every id in order: float32 score, uint32 byte length,
// the token's raw bytes. score = -log(rank + 1) for a token that is the result of a merge (the last merge
// producing that string wins, as the exporter's dict does), else -1e6.
#include <cstdint>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"

namespace qt::tok {

struct Qwen3cTokenizer {
  uint32_t max_token_length = 0;
  uint32_t bos_id = 0;
  uint32_t eos_id = 0;
  std::vector<float> scores;
  std::vector<std::string> tokens;  // raw bytes per id
};

// Builds the qwen3.c table from a HF tokenizer. bos/eos default (-1) to the ids qwen3.c's exporter takes
// from config.json: Tokenizer::bos_id() (<|endoftext|> 151643) and <|im_end|> (151645).
Qwen3cTokenizer to_qwen3c(const Tokenizer& tokenizer, int64_t bos_id = -1, int64_t eos_id = -1);

// Writes the file (throws qt::Error naming the path on I/O failure).
void write_qwen3c_tokenizer(const Qwen3cTokenizer& table, const std::string& path);
// Convenience for the converter: to_qwen3c + write.
void write_qwen3c_tokenizer(const Tokenizer& tokenizer, const std::string& path, int64_t bos_id = -1,
                            int64_t eos_id = -1);
std::vector<uint8_t> serialize_qwen3c_tokenizer(const Qwen3cTokenizer& table);

// Reads and validates a file (truncation, absurd lengths -> qt::Error naming the path and entry).
// expected_count = -1 reads entries until the end of the file; otherwise exactly that many.
Qwen3cTokenizer read_qwen3c_tokenizer(const std::string& path, int64_t expected_count = -1);
Qwen3cTokenizer parse_qwen3c_tokenizer(const uint8_t* data, size_t size, const std::string& origin,
                                       int64_t expected_count = -1);

}  // namespace qt::tok
