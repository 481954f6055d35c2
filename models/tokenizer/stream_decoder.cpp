#include "models/tokenizer/stream_decoder.h"

#include "models/tokenizer/utf8.h"

namespace qt::tok {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::take_complete() {
  // Everything except a trailing proper prefix of a well-formed sequence can be settled now: later bytes
  // cannot change how the earlier ones decode (maximal-subpart replacement is local).
  size_t keep = utf8::incomplete_tail(pending_);
  std::string out;
  utf8::append_repaired(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  int32_t one[1] = {id};
  pending_ += tokenizer_->decode_bytes(one, skip_special_);
  return take_complete();
}

std::string StreamDecoder::flush() {
  std::string out;
  utf8::append_repaired(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace qt::tok
