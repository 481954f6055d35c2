// The writer's contract: it enforces plan order and shapes, rejects bad options and non-finite weights,
// turns write failures into qt::Error, and never leaves a partial file behind.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

namespace {

WriterOptions dense_options(FileFormat fmt = FileFormat::AJC1) {
  WriterOptions o;
  o.format = fmt;
  o.config = tiny_dense();
  return o;
}

std::string error_of(const std::function<void()>& fn, int* code = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (code) *code = e.exit_code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("writer rejects a tensor out of plan order and removes the partial file", "[formats]") {
  const auto dir = scratch_dir("writer_order");
  const auto path = dir / "m.bin";
  {
    auto w = ModelWriter::create(path.string(), dense_options());
    const auto& plan = w->plan();
    const std::vector<float> v0 = tensor_values(plan[0]);
    w->write_float(plan[0], v0.data());
    const std::vector<float> v2 = tensor_values(plan[2]);
    const std::string msg = error_of([&] { w->write_float(plan[2], v2.data()); });
    CHECK(msg.find("supplied where the plan expects " + plan[1].hf_name) != std::string::npos);
    CHECK(std::filesystem::exists(dir / "m.bin.partial"));
    TensorSlot wrong_shape = plan[1];
    wrong_shape.cols += 1;
    CHECK_FALSE(error_of([&] { w->write_float(wrong_shape, v2.data()); }).empty());
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(dir / "m.bin.partial"));
}

TEST_CASE("writer finish() before every tensor is written fails, and an existing file is left untouched", "[formats]") {
  const auto dir = scratch_dir("writer_early_finish");
  const auto path = dir / "m.bin";
  write_bytes(path, {1, 2, 3});
  {
    auto w = ModelWriter::create(path.string(), dense_options());
    const std::string msg = error_of([&] { w->finish(); });
    CHECK(msg.find("finish() after 0 of ") != std::string::npos);
    CHECK(msg.find(w->plan()[0].hf_name) != std::string::npos);
  }
  CHECK(read_bytes(path) == std::vector<uint8_t>{1, 2, 3});
  CHECK_FALSE(std::filesystem::exists(dir / "m.bin.partial"));
}

TEST_CASE("writer rejects non-finite weights naming the tensor and element", "[formats]") {
  const auto dir = scratch_dir("writer_nan");
  auto w = ModelWriter::create((dir / "m.bin").string(), dense_options());
  std::vector<float> v = tensor_values(w->plan()[0]);
  v[5] = std::nanf("");
  int code = 0;
  const std::string msg = error_of([&] { w->write_float(w->plan()[0], v.data()); }, &code);
  CHECK(code == kExitBadInput);
  CHECK(msg.find(w->plan()[0].hf_name + " element 5 is NaN") != std::string::npos);
}

TEST_CASE("writer accepts packed AWQ only for AWQ_INT4 slots", "[formats]") {
  const auto dir = scratch_dir("writer_awq_slot");
  auto w = ModelWriter::create((dir / "m.bin").string(), dense_options());
  const std::vector<int32_t> dummy(1 << 16);
  const std::string msg = error_of([&] {
    w->write_awq(w->plan()[0], dummy.data(), dummy.data(), reinterpret_cast<const uint16_t*>(dummy.data()));
  });
  CHECK(msg.find("not AWQ_INT4") != std::string::npos);
}

TEST_CASE("writer validates options like the reader validates headers", "[formats]") {
  const auto dir = scratch_dir("writer_options");
  const std::string path = (dir / "m.bin").string();
  auto err = [&](const WriterOptions& o) { return error_of([&] { ModelWriter::create(path, o); }); };
  WriterOptions o = dense_options();
  o.config.group_size = 48;
  CHECK(err(o).find("group_size = 48: must divide dim = 64") != std::string::npos);
  o = dense_options();
  o.config.n_kv_heads = 4;
  CHECK(err(o).find("n_kv_heads = 4") != std::string::npos);
  o = dense_options();
  o.config.hidden_dim = 100;  // qwen3.c's rule picks 64 from dim; it must also divide hidden_dim
  CHECK(err(o).find("must divide hidden_dim = 100") != std::string::npos);
  o = dense_options();
  o.expert_type = WeightType::INT8_GW_SYM;
  CHECK(err(o).find("needs the moe3 format") != std::string::npos);
  o = dense_options(FileFormat::MOE3);
  CHECK(err(o).find("Qwen3-MoE models only") != std::string::npos);
  o.config = tiny_moe();
  o.config.num_experts_per_tok = 9;
  CHECK(err(o).find("num_experts_per_tok = 9") != std::string::npos);
  o.config = tiny_moe();
  o.expert_type = WeightType::F16;
  CHECK(err(o).find("cannot be stored in moe3") != std::string::npos);
  o = dense_options(FileFormat::AK48);
  o.config.head_dim = 4;  // kv_dim = 8, q_dim = 24: AWQ group must divide 24
  CHECK(err(o).empty());
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST_CASE("a write failure (file size limit, as on a full disk) is a qt::Error and leaves no file", "[formats]") {
  const auto dir = scratch_dir("writer_full");
  const auto path = dir / "m.bin";
  // RLIMIT_FSIZE makes write() fail with EFBIG once the file would grow past the limit, the same path
  // through the writer as ENOSPC. SIGXFSZ is ignored so the failure is an error return, not a signal.
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto prev = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  int code = 0;
  std::string msg;
  {
    auto w = ModelWriter::create(path.string(), dense_options());
    msg = error_of([&] {
      for (const TensorSlot& s : w->plan()) {
        const std::vector<float> v = tensor_values(s);
        w->write_float(s, v.data());
      }
      w->finish();
    }, &code);
  }
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK(code == kExitFailure);
  CHECK(msg.find("m.bin.partial: write of") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(dir / "m.bin.partial"));
}

TEST_CASE("describe() lists format, header fields and a tensor table", "[formats]") {
  const auto dir = scratch_dir("writer_describe");
  WriterOptions o;
  o.format = FileFormat::MOE3;
  o.config = tiny_moe();
  o.expert_type = WeightType::AWQ_INT4;
  const std::string path = (dir / "m.bin").string();
  write_model(path, o);
  const nlohmann::json d = ModelFile::open(path)->describe();
  CHECK(d["format"] == "moe3");
  CHECK(d["version"] == 1);
  CHECK(d["header"]["num_experts"] == 4);
  CHECK(d["header"]["expert_type"] == "AWQ_INT4");
  CHECK(d["header"]["rope_theta"].get<double>() == 1e6);
  const size_t expected = 4 * 2 + 1 + 1 + 2 * (5 + 3 * 4);
  REQUIRE(d["tensors"].size() == expected);
  const auto& t = d["tensors"][10];
  CHECK(t["name"] == "model.layers.0.self_attn.q_proj.weight");
  CHECK(t["type"] == "Q8_0");
  CHECK(t["shape"] == nlohmann::json::array({192, 64}));
  CHECK(t["bytes"] == 192 * 64 + 192 * 64 / 64 * 4);
  CHECK(d["tensors"][0]["shape"] == nlohmann::json::array({64}));
}

TEST_CASE("format names parse both ways and an unknown name is a bad-input error", "[formats]") {
  for (FileFormat f : {FileFormat::AJC1, FileFormat::MOE3, FileFormat::AK48}) {
    CHECK(parse_file_format(file_format_name(f)) == f);
  }
  int code = 0;
  const std::string msg = error_of([] { parse_file_format("gguf"); }, &code);
  CHECK(code == kExitBadInput);
  CHECK(msg.find("'gguf'") != std::string::npos);
}
