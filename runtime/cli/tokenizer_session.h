#pragma once
// qrun's text side: which tokenizer to load, how each chat turn becomes tokens when the KV cache already
// holds the conversation so far, and streaming the generated text to stdout.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer/stream_decoder.h"
#include "models/tokenizer/tokenizer.h"

namespace qt::rt {

struct ChatState {
  std::string system;
  bool think = true;
  bool raw = false;
  int turns = 0;
  std::vector<int32_t> history;  // every token seen (repetition-penalty window)
  // The last sampled token of the previous turn: generated but not yet run through the model.
  std::optional<int32_t> pending;
  bool pending_is_end = false;

  void reset();
  void after_turn(const std::vector<int32_t>& generated, const std::vector<int32_t>& end_tokens);
};

class TokenizerSession {
 public:
  // `explicit_path` empty: tokenizer.json beside the model, else the shipped Qwen3 tokenizer. Throws
  // qt::Error if the file is missing or its ids do not fit the model's vocabulary.
  TokenizerSession(const std::string& explicit_path, const std::string& model_path, int64_t model_vocab);

  const tok::Tokenizer& tokenizer() const { return tok_; }
  const std::vector<int32_t>& end_tokens() const { return end_; }

  // The tokens to feed for the next user message. The first turn is the Qwen3 chat template rendered with
  // add_generation_prompt (and enable_thinking=false for --no-think); later turns continue the cached
  // conversation with exactly the text the template would add for them. The reasoning of earlier answers
  // stays in the cache (the template would drop it from history: the price of reusing the KV cache).
  std::vector<int32_t> turn_tokens(const ChatState& chat, const std::string& message) const;

 private:
  tok::Tokenizer tok_;
  std::vector<int32_t> end_;
};

// Streams generated tokens as UTF-8 text (special tokens hidden), flushing after each token.
class StreamPrinter {
 public:
  explicit StreamPrinter(const TokenizerSession& session);
  void push(int32_t token);
  void finish();  // completes a held-back character and ends the line

 private:
  tok::StreamDecoder decoder_;
};

}  // namespace qt::rt
