#pragma once
// The property checks behind the libFuzzer target (qtok_fuzz) and its CTest replay: one input must never
// crash and must satisfy every invariant below; a violation throws std::logic_error naming it.
#include <cstddef>
#include <cstdint>

#include "models/tokenizer/tokenizer.h"

namespace qt::tok {

// Invariants checked for `data`:
//  * encode(kError) throws exactly when the bytes are not UTF-8; encode(kReplace) never throws;
//  * the NFC fast path agrees with utf8proc's full NFC;
//  * for text without '<' (no added tokens), decode(encode(x)) == NFC(x);
//  * the O(n^2) and heap BPE loops produce the same ids;
//  * the bytes read as token ids stream-decode to valid UTF-8 chunks that concatenate to decode(ids).
void fuzz_check_one(const Tokenizer& tokenizer, const uint8_t* data, size_t size);

}  // namespace qt::tok
