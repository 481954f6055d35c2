#include "tests/fuzz/fuzz_entries.h"

namespace qt::fuzz {

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"model_file", model_file}, {"safetensors", safetensors}, {"hf_config", hf_config},
      {"tokenizer_json", tokenizer_json}, {"chat_json", chat_json}, {"kt_cache", kt_cache},
      {"store_row", store_row}, {"report_json", report_json},
  };
  return all;
}

}  // namespace qt::fuzz
