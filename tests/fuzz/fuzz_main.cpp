// libFuzzer entry for one parser (QTUNE_FUZZ_ENTRY names its function in fuzz_entries.h). Run, e.g.:
//   build-fuzz/bin/qtune_fuzz_chat_json -runs=1000000 tests/fuzz/corpus/chat_json
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    qt::fuzz::QTUNE_FUZZ_ENTRY(data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::abort();
  }
  return 0;
}
