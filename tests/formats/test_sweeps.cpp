// Exhaustive versions of the hardening tests (label `slow`): every truncation length and every value of
// every header byte, for each format. A rejected file must be a qt::Error naming the file; an accepted
// one must be fully readable (ASan checks the reads when built with sanitizers).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

namespace {

std::vector<uint8_t> tiny_file(const std::filesystem::path& dir, FileFormat fmt) {
  WriterOptions o;
  o.format = fmt;
  o.config = fmt == FileFormat::MOE3 ? tiny_moe() : tiny_dense();
  o.config.n_layers = 1;
  o.config.vocab_size = 8;
  if (fmt == FileFormat::MOE3) o.expert_type = WeightType::AWQ_INT4;
  const std::string path = (dir / "tiny.bin").string();
  write_model(path, o);
  return read_bytes(path);
}

// Sweeps write hundreds of thousands of small files: keep them in memory-backed /dev/shm when present.
std::filesystem::path sweep_dir(const std::string& name) {
  const std::filesystem::path shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm)) return scratch_dir(name);
  std::filesystem::path dir = shm / ("qtune-formats-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// "" if accepted (after reading every matrix), else the message.
std::string try_open(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  write_bytes(path, bytes);
  try {
    auto f = ModelFile::open(path.string());
    for (const LayerWeights& l : f->weights().layers) {
      for (const QTensor* t : {&l.wq, &l.wo, &l.w2}) {
        if (!t->empty()) (void)dequantize(*t);
      }
      for (int64_t e = 0; e < l.expert_w2.experts; ++e) (void)dequantize(l.expert_w2.expert(e));
    }
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("every truncation length of every format is rejected", "[formats][slow]") {
  for (FileFormat fmt : {FileFormat::AJC1, FileFormat::MOE3, FileFormat::AK48}) {
    const auto dir = sweep_dir(std::string("sweep_trunc_") + file_format_name(fmt));
    const std::vector<uint8_t> good = tiny_file(dir, fmt);
    const auto path = dir / "cut.bin";
    for (size_t s = 0; s < good.size(); ++s) {
      const std::string msg = try_open(path, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(s)));
      REQUIRE(msg.find(path.string()) == 0);
    }
    std::filesystem::remove_all(dir.parent_path().filename().string().rfind("qtune-formats-", 0) == 0 ? dir.parent_path() : dir);
  }
}

TEST_CASE("every value of every header byte is accepted or rejected cleanly", "[formats][slow]") {
  for (FileFormat fmt : {FileFormat::AJC1, FileFormat::MOE3, FileFormat::AK48}) {
    const auto dir = sweep_dir(std::string("sweep_bytes_") + file_format_name(fmt));
    const std::vector<uint8_t> good = tiny_file(dir, fmt);
    const auto path = dir / "mut.bin";
    // Every value of the field and extension bytes; two values of each reserved padding byte.
    for (size_t off = 0; off < 256; ++off) {
      for (int v = 0; v < 256; ++v) {
        if (good[off] == v || (off >= 96 && v != 1 && v != 255)) continue;
        std::vector<uint8_t> b = good;
        b[off] = static_cast<uint8_t>(v);
        const std::string msg = try_open(path, b);
        if (!msg.empty()) REQUIRE(msg.find(path.string()) == 0);
      }
    }
    std::filesystem::remove_all(dir.parent_path().filename().string().rfind("qtune-formats-", 0) == 0 ? dir.parent_path() : dir);
  }
}
