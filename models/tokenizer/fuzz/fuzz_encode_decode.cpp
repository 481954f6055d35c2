// libFuzzer entry: build with -DQTUNE_FUZZ=ON and clang, run
//   build-fuzz/bin/qtok_fuzz tests/tokenizer/fuzz_corpus -max_total_time=300
// The tokenizer is qtune's Qwen3 tokenizer.json (QTUNE_HOME or the source tree).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "models/tokenizer/fuzz/fuzz_check.h"
#include "models/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const qt::tok::Tokenizer tokenizer = qt::tok::load_default_tokenizer();
  try {
    qt::tok::fuzz_check_one(tokenizer, data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::abort();
  }
  return 0;
}
