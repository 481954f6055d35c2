// Input hardening: truncated, extended and mutated model files are each rejected with one qt::Error
// (exit code 2) naming the file and the field, and random header corruption never crashes or reads
// outside the mapping. Runs under ASan+UBSan (label `sanitize`).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "models/quant/quantized_tensor.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

namespace {

std::vector<uint8_t> valid_file(const std::filesystem::path& dir, FileFormat fmt,
                                WeightType expert = WeightType::Q8_0) {
  WriterOptions o;
  o.format = fmt;
  o.config = fmt == FileFormat::MOE3 ? tiny_moe() : tiny_dense();
  o.config.vocab_size = 16;
  o.expert_type = expert;
  const std::string path = (dir / "valid.bin").string();
  write_model(path, o);
  return read_bytes(path);
}

// Opens `bytes` as a file and returns the error message, or "" if it opened. On success every tensor
// is dequantized, so ASan sees any view that reaches outside the mapping.
std::string open_error(const std::filesystem::path& path, const std::vector<uint8_t>& bytes, int* exit_code = nullptr) {
  write_bytes(path, bytes);
  try {
    auto f = ModelFile::open(path.string());
    const ModelWeights& w = f->weights();
    double sink = 0;
    auto touch = [&](const QTensor& t) {
      if (!t.empty()) sink += static_cast<double>(dequantize(t).back());
    };
    touch(w.embedding);
    touch(w.classifier);
    for (const LayerWeights& l : w.layers) {
      for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3, &l.router}) touch(*t);
      for (const auto* v : {&l.expert_w1, &l.expert_w2, &l.expert_w3}) {
        for (int64_t e = 0; e < v->experts; ++e) touch(v->expert(e));
      }
    }
    (void)sink;
    return "";
  } catch (const Error& e) {
    if (exit_code) *exit_code = e.exit_code();
    return e.what();
  }
}

template <class T>
std::vector<uint8_t> with_field(std::vector<uint8_t> b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
  return b;
}

struct Mutation {
  const char* what;
  size_t offset;
  int width;  // 1 = uint8, 4 = int32, -4 = float32
  double value;
  const char* expect;  // substring of the message (the field and its value)
};

void check_mutations(FileFormat fmt, const std::vector<Mutation>& muts, WeightType expert = WeightType::Q8_0) {
  const auto dir = scratch_dir(std::string("mut_") + file_format_name(fmt) + weight_type_name(expert));
  const std::vector<uint8_t> good = valid_file(dir, fmt, expert);
  const auto path = dir / "bad.bin";
  REQUIRE(open_error(path, good).empty());
  for (const Mutation& m : muts) {
    INFO(m.what);
    std::vector<uint8_t> bad;
    if (m.width == 1) bad = with_field<uint8_t>(good, m.offset, static_cast<uint8_t>(m.value));
    else if (m.width == 4) bad = with_field<int32_t>(good, m.offset, static_cast<int32_t>(m.value));
    else bad = with_field<float>(good, m.offset, static_cast<float>(m.value));
    int code = 0;
    const std::string msg = open_error(path, bad, &code);
    INFO(msg);
    CHECK(code == kExitBadInput);
    CHECK(msg.find(path.string()) == 0);
    CHECK(msg.find(m.expect) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

}  // namespace

TEST_CASE("truncated and extended files are rejected with the size the header implies", "[formats]") {
  for (FileFormat fmt : {FileFormat::AJC1, FileFormat::MOE3, FileFormat::AK48}) {
    const auto dir = scratch_dir(std::string("trunc_") + file_format_name(fmt));
    const std::vector<uint8_t> good = valid_file(dir, fmt);
    const auto path = dir / "cut.bin";
    std::vector<size_t> sizes = {0, 1, 3, 4, 8, 40, 255, 256, 257, good.size() / 2, good.size() - 4, good.size() - 1};
    for (size_t s = 300; s < good.size(); s += 997) sizes.push_back(s);
    for (size_t s : sizes) {
      INFO(file_format_name(fmt) << " truncated to " << s);
      int code = 0;
      const std::string msg =
          open_error(path, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(s)), &code);
      CHECK(code == kExitBadInput);
      if (s < 256) {
        CHECK(msg.find("shorter than the 256-byte model header") != std::string::npos);
      } else {
        CHECK(msg.find("file size " + std::to_string(s) + " bytes does not match the " + std::to_string(good.size())) !=
              std::string::npos);
      }
    }
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    CHECK(open_error(path, longer).find("does not match") != std::string::npos);
  }
}

TEST_CASE("ajc1 header fields out of range are rejected naming the field and value", "[formats]") {
  check_mutations(FileFormat::AJC1, {
      {"magic", 0, 4, 0x31636a61, "magic = 0x31636A61"},
      {"magic zero", 0, 4, 0, "field magic"},
      {"version", 4, 4, 2, "version = 2"},
      {"dim 0", 8, 4, 0, "dim = 0"},
      {"dim negative", 8, 4, -64, "dim = -64"},
      {"dim huge", 8, 4, 1 << 30, "dim = 1073741824"},
      {"hidden_dim 0", 12, 4, 0, "hidden_dim = 0"},
      {"n_layers 0", 16, 4, 0, "n_layers = 0"},
      {"n_layers huge", 16, 4, 2000000000, "n_layers = 2000000000"},
      {"n_heads 0", 20, 4, 0, "n_heads = 0"},
      {"n_kv_heads 0", 24, 4, 0, "n_kv_heads = 0"},
      {"n_kv_heads not dividing", 24, 4, 4, "n_kv_heads = 4: must divide n_heads = 6"},
      {"n_kv_heads above n_heads", 24, 4, 12, "n_kv_heads = 12"},
      {"vocab negative", 28, 4, -1, "vocab_size = -1"},
      {"max_seq_len 0", 32, 4, 0, "max_seq_len = 0"},
      {"head_dim odd", 36, 4, 33, "head_dim = 33"},
      {"head_dim 0", 36, 4, 0, "head_dim = 0"},
      {"shared 2", 40, 4, 2, "shared_classifier = 2"},
      {"group 0", 44, 4, 0, "group_size = 0"},
      {"group not dividing", 44, 4, 48, "group_size = 48: must divide dim = 64"},
      {"group above bounds", 44, 4, 1 << 20, "group_size = 1048576"},
      {"MoE field in ajc1", 0x30, 4, 8, "header byte 48"},
      {"theta negative", 0x40, -4, -1.0, "rope_theta = -1"},
      {"theta NaN", 0x40, -4, std::nan(""), "rope_theta = nan"},
      {"theta denormal (RoPE frequencies overflow)", 0x40, -4, 1e-45, "rope_theta = 1.4"},
      {"theta below 1", 0x40, -4, 0.5, "rope_theta = 0.5: must be in [1"},
      {"eps too large", 0x44, -4, 2.0, "rms_norm_eps = 2"},
      {"padding", 200, 1, 7, "header byte 200 = 7"},
      {"vocab consistent but size wrong", 28, 4, 17, "does not match"},
      {"layers consistent but size wrong", 16, 4, 3, "does not match"},
  });
}

TEST_CASE("moe3 header fields out of range are rejected naming the field and value", "[formats]") {
  check_mutations(FileFormat::MOE3, {
      {"num_experts 0", 0x30, 4, 0, "num_experts = 0"},
      {"num_experts huge", 0x30, 4, 1 << 20, "num_experts = 1048576"},
      {"per_tok above experts", 0x34, 4, 5, "num_experts_per_tok = 5"},
      {"per_tok 0", 0x34, 4, 0, "num_experts_per_tok = 0"},
      {"norm_topk 3", 0x38, 4, 3, "norm_topk_prob = 3"},
      {"padding 0x3C", 0x3C, 1, 1, "header byte 60"},
      {"expert_type 4", 0x48, 4, 4, "expert_type = 4"},
      {"expert_type negative", 0x48, 4, -1, "expert_type = -1"},
      {"expert group for Q8_0 differs", 0x4C, 4, 32, "expert_group_size = 32"},
      {"expert group negative", 0x4C, 4, -8, "expert_group_size = -8"},
      {"expert type changes the size", 0x48, 4, 1, "does not match"},
      {"version", 4, 4, 5, "version = 5"},
  });
  check_mutations(FileFormat::MOE3, {
      {"expert group not dividing hidden", 0x4C, 4, 48, "expert_group_size = 48: must divide dim = 64"},
      {"expert group 3", 0x4C, 4, 3, "expert_group_size = 3"},
      {"expert type Q8_0 changes the size", 0x48, 4, 0, "does not match"},
  }, WeightType::AWQ_INT4);
}

TEST_CASE("ak48 header fields out of range are rejected naming the field and value", "[formats]") {
  check_mutations(FileFormat::AK48, {
      {"version 1", 4, 4, 1, "version = 1"},
      {"shared 2", 36, 1, 2, "shared_classifier = 2"},
      {"head_dim 0 (unaligned field)", 37, 4, 0, "head_dim = 0"},
      {"head_dim odd", 37, 4, 31, "head_dim = 31"},
      {"group not dividing", 41, 4, 128, "group_size = 128: must divide dim = 64"},
      {"group negative", 41, 4, -64, "group_size = -64"},
      {"head_dim 2 breaks the group rule", 37, 4, 2, "n_heads * head_dim = 12"},
      {"theta inf", 45, -4, 1.0 / 0.0, "rope_theta = inf"},
      {"eps negative", 49, -4, -1e-6, "rms_norm_eps = -9.99999997e-07"},
      {"padding", 53, 1, 1, "header byte 53"},
      {"hidden not divisible by the AWQ group", 12, 4, 196, "must divide hidden_dim = 196"},
  });
}

TEST_CASE("AWQ output dimensions that are not a multiple of 8 are rejected even when the group divides them",
          "[formats]") {
  // A group of 4 divides 196 and 132, so only the 8-columns-per-word packing rule can reject these headers.
  struct Case {
    FileFormat fmt;
    WeightType expert;
    size_t group_offset;
    int32_t hidden;
  };
  for (const Case& c : {Case{FileFormat::AK48, WeightType::Q8_0, 41, 196},
                        Case{FileFormat::MOE3, WeightType::AWQ_INT4, 0x4C, 132}}) {
    const auto dir = scratch_dir(std::string("awq8_") + file_format_name(c.fmt));
    const std::vector<uint8_t> good = valid_file(dir, c.fmt, c.expert);
    const std::vector<uint8_t> bad = with_field<int32_t>(with_field<int32_t>(good, c.group_offset, 4), 12, c.hidden);
    int code = 0;
    const std::string msg = open_error(dir / "bad.bin", bad, &code);
    INFO(msg);
    CHECK(code == kExitBadInput);
    CHECK(msg.find("hidden_dim = " + std::to_string(c.hidden) + ", but AWQ_INT4 packs 8 output columns") !=
          std::string::npos);
  }
}

TEST_CASE("random header corruption is either accepted or rejected cleanly, never a crash", "[formats]") {
  for (FileFormat fmt : {FileFormat::AJC1, FileFormat::MOE3, FileFormat::AK48}) {
    const auto dir = scratch_dir(std::string("fuzz_") + file_format_name(fmt));
    const std::vector<uint8_t> good = valid_file(dir, fmt, fmt == FileFormat::MOE3 ? WeightType::INT8_GW_ASYM
                                                                                     : WeightType::Q8_0);
    const auto path = dir / "fuzz.bin";
    std::mt19937 rng(1234 + static_cast<uint32_t>(fmt));
    int rejected = 0;
    for (int iter = 0; iter < 300; ++iter) {
      std::vector<uint8_t> b = good;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < flips; ++i) {
        const size_t off = rng() % 96;  // the fields and the extension area
        b[off] = static_cast<uint8_t>(rng());
      }
      if (rng() % 4 == 0) b.resize(rng() % (b.size() + 1));
      const std::string msg = open_error(path, b);
      if (!msg.empty()) {
        ++rejected;
        CHECK(msg.find(path.string()) == 0);
      }
    }
    CHECK(rejected > 200);  // almost every corruption changes a validated field
  }
}

TEST_CASE("missing files, directories and empty files are rejected", "[formats]") {
  const auto dir = scratch_dir("missing");
  int code = 0;
  try {
    ModelFile::open((dir / "nope.bin").string());
  } catch (const Error& e) {
    code = e.exit_code();
    CHECK(std::string(e.what()).find("nope.bin") != std::string::npos);
  }
  CHECK(code == kExitBadInput);
  CHECK_THROWS_AS(ModelFile::open(dir.string()), Error);
  CHECK(open_error(dir / "empty.bin", {}).find("file is 0 bytes") != std::string::npos);
}

TEST_CASE("quantizers stay defined on extreme inputs (huge, subnormal, mixed-sign groups)", "[formats]") {
  const int64_t N = 8, K = 8;
  std::vector<float> w(static_cast<size_t>(N * K));
  const float mags[] = {3e38f, -3e38f, 1e-40f, -1e-45f, 0.0f, 65504.0f, -70000.0f, 1e-8f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = mags[(i + i / 8) % 8];
  for (WeightType t : {WeightType::Q8_0, WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM, WeightType::AWQ_INT4}) {
    INFO(weight_type_name(t));
    const quant::QuantizedTensor q = quant::quantize_tensor(w.data(), N, K, t, 4);
    // Values may be inf/NaN after fp16 overflow; what matters is that every stored code is in range and
    // nothing is undefined behaviour (UBSan runs this test).
    if (t == WeightType::Q8_0) {
      for (uint8_t b : q.values) CHECK(static_cast<int8_t>(b) >= -127);
    }
    CHECK(dequantize(q.view()).size() == static_cast<size_t>(N * K));
  }
}
