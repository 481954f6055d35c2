// The qtok command line: stdin/stdout contracts and exit codes (2 with one error line for bad input).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/tokenizer/golden_data.h"
#include "common/paths.h"

using namespace qt::tok::test;

namespace {

struct Result {
  int status;
  std::string out;
};

// Runs qtok with `input` on stdin (written to a file first, so no shell quoting of the data).
Result run_qtok(const std::string& args, const std::string& input) {
  // A unique file per call: CTest runs these test cases in parallel processes.
  std::string in_path = qt::binary_root() + "/tests/qtok_cli_input_XXXXXX";
  int fd = mkstemp(in_path.data());
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream f(in_path, std::ios::binary);
    f << input;
  }
  std::string cmd = qt::binary_root() + "/bin/qtok " + args + " < " + in_path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  std::remove(in_path.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("qtok encode, decode and chat print what the library computes", "[tokenizer]") {
  auto enc = run_qtok("encode", "Hello world!<|im_end|>");
  REQUIRE(enc.status == 0);
  REQUIRE(enc.out == "[9707, 1879, 0, 151645]\n");
  auto dec = run_qtok("decode", "[9707, 1879, 0, 151645]");
  REQUIRE(dec.status == 0);
  REQUIRE(dec.out == "Hello world!<|im_end|>");
  auto skip = run_qtok("decode --skip-special", "[9707, 151645]");
  REQUIRE(skip.out == "Hello");
  auto chat = run_qtok("chat --add-generation-prompt --no-think", R"([{"role": "user", "content": "%s"}])");
  REQUIRE(chat.status == 0);
  REQUIRE(chat.out == "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST_CASE("qtok rejects bad input with exit code 2 and one error line", "[tokenizer]") {
  auto bad_utf8 = run_qtok("encode", "ok\xC3(");
  REQUIRE(bad_utf8.status == 2);
  REQUIRE_THAT(bad_utf8.out, Catch::Contains("not valid UTF-8") && Catch::Contains("byte 2"));
  auto replaced = run_qtok("encode --replace-invalid", "ok\xC3(");
  REQUIRE(replaced.status == 0);
  auto bad_ids = run_qtok("decode", "[1, -5]");
  REQUIRE(bad_ids.status == 2);
  REQUIRE_THAT(bad_ids.out, Catch::Contains("element 1"));
  auto bad_chat = run_qtok("chat", "{\"messages\": [{\"role\": \"user\"}]}");
  REQUIRE(bad_chat.status == 2);
  auto bad_tok = run_qtok("encode --tokenizer /nonexistent/tokenizer.json", "x");
  REQUIRE(bad_tok.status == 2);
  REQUIRE_THAT(bad_tok.out, Catch::Contains("/nonexistent/tokenizer.json"));
}

TEST_CASE("qtok decode rejects ids outside the vocabulary with one line naming the element", "[tokenizer]") {
  for (const char* id : {"151669", "151935", "2147483647"}) {
    auto r = run_qtok("decode", std::string("[9707, ") + id + "]");
    INFO(id);
    REQUIRE(r.status == 2);
    REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    REQUIRE_THAT(r.out, Catch::Contains("element 1") && Catch::Contains(id) && Catch::Contains("vocabulary"));
  }
  REQUIRE(run_qtok("decode", "[151668]").status == 0);  // the last id is in the vocabulary
}

TEST_CASE("qtok encode --no-added-tokens splits special tokens but keeps <think> (HF split_special_tokens)",
          "[tokenizer]") {
  auto r = run_qtok("encode --no-added-tokens", "<think>hi</think>");
  REQUIRE(r.status == 0);
  REQUIRE(r.out == "[151667, 6023, 151668]\n");
}

TEST_CASE("qtok export writes the qwen3.c file", "[tokenizer]") {
  std::string path = qt::binary_root() + "/tests/qtok_cli_export_" + std::to_string(getpid()) + ".tokenizer";
  auto r = run_qtok("export --out " + path, "");
  REQUIRE(r.status == 0);
  auto expected = load_json("qwen3c_expected.json");
  REQUIRE(read_file(path).size() == expected["size"].get<size_t>());
  std::remove(path.c_str());
}

TEST_CASE("qtok refuses JSON nested deeper than any input it reads with one line, never overflowing its stack",
          "[tokenizer]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Result r = run_qtok("decode", deep);
  CHECK(r.status == 2);
  CHECK(r.out.find("expected a JSON array of token ids, found nested arrays or objects") != std::string::npos);
  const std::string tools = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[" +
                            std::string(30000, '[') + std::string(30000, ']') + "]}";
  r = run_qtok("chat", tools);
  CHECK(r.status == 2);
  CHECK(r.out.find("nested more than 256 levels deep") != std::string::npos);
  // A tool schema a few levels deep is what chat templates see every day.
  r = run_qtok("chat", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"a\":{\"b\":[[1]]}}]}");
  CHECK(r.status == 0);
}

TEST_CASE("qtok export never writes over the tokenizer it reads", "[tokenizer]") {
  const std::string copy = qt::binary_root() + "/tests/qtok-export-self-" + std::to_string(::getpid()) + ".json";
  std::filesystem::copy_file(qt::default_hf_tokenizer_path(), copy, std::filesystem::copy_options::overwrite_existing);
  const auto size = std::filesystem::file_size(copy);
  const Result r = run_qtok("export -t " + copy + " -o " + copy, "");
  CHECK(r.status == 2);
  CHECK(r.out.find("is the input") != std::string::npos);
  CHECK(std::filesystem::file_size(copy) == size);
  std::remove(copy.c_str());
}
