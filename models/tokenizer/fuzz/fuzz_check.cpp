#include "models/tokenizer/fuzz/fuzz_check.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/tokenizer/bpe.h"
#include "models/tokenizer/stream_decoder.h"
#include "models/tokenizer/tokenizer_impl.h"
#include "models/tokenizer/utf8.h"

namespace qt::tok {
namespace {

void require(bool ok, const char* what) {
  if (!ok) throw std::logic_error(std::string("fuzz invariant violated: ") + what);
}

}  // namespace

void fuzz_check_one(const Tokenizer& tokenizer, const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const bool valid = is_valid_utf8(input);
  bool threw = false;
  try {
    (void)tokenizer.encode(input);
  } catch (const Error&) {
    threw = true;
  }
  require(threw == !valid, "encode rejects exactly the invalid UTF-8");

  EncodeOptions replace;
  replace.invalid_utf8 = InvalidUtf8::kReplace;
  std::vector<int32_t> ids = tokenizer.encode(input, replace);
  const std::string text = repair_utf8(input);
  require(is_valid_utf8(text), "repair_utf8 yields valid UTF-8");
  require(valid == (text == input), "repair_utf8 leaves valid text alone");
  for (int32_t id : ids) require(id >= 0 && id < tokenizer.vocab_size(), "ids are in the vocabulary");

  std::string fast;
  utf8::append_nfc(text, fast);
  std::string reference;
  utf8::append_nfc_slow(text, reference);
  require(fast == reference, "NFC fast path agrees with the full HF-compatible NFC");
  if (text.find('<') == std::string::npos) {
    require(tokenizer.decode(ids) == reference, "decode(encode(x)) == NFC(x)");
  }

  // The two BPE loops on the raw bytes as one piece (no pre-tokenizer), limited to keep the fuzzer fast.
  std::string_view piece = input.substr(0, 512);
  if (!piece.empty()) {
    const Tokenizer::Impl& impl = tokenizer.internals();
    std::vector<int32_t> a, b;
    bpe_merge_small(piece, impl.byte_ids.data(), impl.merges, a);
    bpe_merge_heap(piece, impl.byte_ids.data(), impl.merges, b);
    require(a == b, "small and heap BPE loops agree");
  }

  std::vector<int32_t> stream_ids;
  for (size_t i = 0; i + 1 < size; i += 2) {
    // Mostly low ids (single bytes and short pieces, which split characters) plus some above the vocabulary.
    uint32_t v = static_cast<uint32_t>(data[i]) | (static_cast<uint32_t>(data[i + 1]) << 8);
    stream_ids.push_back(static_cast<int32_t>((v & 0x8000) ? v % static_cast<uint32_t>(tokenizer.vocab_size() + 300) : v % 512));
  }
  StreamDecoder sd(tokenizer);
  std::string streamed;
  for (int32_t id : stream_ids) {
    std::string chunk = sd.push(id);
    require(is_valid_utf8(chunk), "stream chunks are valid UTF-8");
    require(sd.pending_bytes() <= 3, "stream holds back at most 3 bytes");
    streamed += chunk;
  }
  std::string tail = sd.flush();
  require(is_valid_utf8(tail), "stream flush is valid UTF-8");
  streamed += tail;
  require(streamed == tokenizer.decode(stream_ids), "streamed text equals decode(ids)");
}

}  // namespace qt::tok
