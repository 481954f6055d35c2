#pragma once
// One entry per input parser, shared by the libFuzzer executables (-DQTUNE_FUZZ=ON, clang) and the CTest
// replay of their corpora (tests/fuzz/corpus/<name>/). An entry feeds one input to the parser and what
// consumes its result; bad input must end in qt::Error. Anything else (another exception type, a crash, a
// sanitizer report) is a finding: the entry throws FuzzFinding for an escaped exception.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace qt::fuzz {

struct FuzzFinding : std::logic_error {
  using std::logic_error::logic_error;
};

using Entry = void (*)(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // also the corpus folder and the executable suffix (qtune_fuzz_<name>)
  Entry entry;
};

// Model files (ajc1, moe3, ak48): header decode and the full open of a file holding the bytes.
void model_file(const uint8_t* data, size_t size);
// A .safetensors file: header, tensor table, reading the first element of every tensor.
void safetensors(const uint8_t* data, size_t size);
// A Hugging Face config.json.
void hf_config(const uint8_t* data, size_t size);
// A tokenizer.json (and encoding a fixed text with what loaded).
void tokenizer_json(const uint8_t* data, size_t size);
// A conversation for the chat template, and the template's tojson.
void chat_json(const uint8_t* data, size_t size);
// A Kernel Tuner cache (text; gzip is zlib's job).
void kt_cache(const uint8_t* data, size_t size);
// A store row: the input split at 0x00 into shape, point and samples columns, read back by the store and by
// the runtime's winner lookup.
void store_row(const uint8_t* data, size_t size);
// A report.json for qbench --render: bounded parse, schema, Markdown and SVG, and the written-back fields.
void report_json(const uint8_t* data, size_t size);

const std::vector<Target>& targets();

}  // namespace qt::fuzz
