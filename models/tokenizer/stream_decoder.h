#pragma once
// Token-by-token decoding for printing while generating. A token may end in the middle of a multi-byte
// UTF-8 character (byte-level BPE splits characters freely); push() holds such a tail back until the
// character is complete, so everything it returns is valid UTF-8 and the concatenation of all pushes and the
// final flush() equals Tokenizer::decode of the whole sequence.
#include <cstdint>
#include <string>

#include "models/tokenizer/tokenizer.h"

namespace qt::tok {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Adds one token; returns the text that is now complete (possibly empty).
  std::string push(int32_t id);
  // Ends the stream: a held-back incomplete character becomes U+FFFD. The decoder can be reused after.
  std::string flush();
  // Bytes held back right now (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string take_complete();
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace qt::tok
