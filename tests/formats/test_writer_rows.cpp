// The writer's row-range contract: a tensor supplied in consecutive row ranges of any sizes gives the same
// bytes as the whole tensor at once, for every format and moe3 expert type (row-major Q8_0/fp16/fp32 and
// the in-major [K][N] INT8 and AWQ arrays, including AWQ ranges that split an 8-row word), and ranges out
// of order or incomplete tensors are rejected.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "tests/formats/test_support.h"

using namespace qt;
using namespace qt::test;

namespace {

struct Variant {
  const char* name;
  FileFormat format;
  WeightType experts;
};

const Variant kVariants[] = {
    {"ajc1", FileFormat::AJC1, WeightType::Q8_0},
    {"ak48", FileFormat::AK48, WeightType::Q8_0},
    {"moe3 q8_0", FileFormat::MOE3, WeightType::Q8_0},
    {"moe3 int8-sym", FileFormat::MOE3, WeightType::INT8_GW_SYM},
    {"moe3 int8-asym", FileFormat::MOE3, WeightType::INT8_GW_ASYM},
    {"moe3 awq", FileFormat::MOE3, WeightType::AWQ_INT4},
};

WriterOptions options_for(const Variant& v) {
  WriterOptions o;
  o.format = v.format;
  o.config = v.format == FileFormat::MOE3 ? tiny_moe() : tiny_dense();
  o.config.shared_classifier = false;  // also exercise the classifier slot
  o.expert_type = v.experts;
  if (v.experts == WeightType::AWQ_INT4) o.expert_group_size = 32;
  return o;
}

// Writes every slot in ranges whose sizes cycle through `sizes` (clipped to the rows left).
void write_in_ranges(const std::string& path, const WriterOptions& o, const std::vector<int64_t>& sizes) {
  auto w = ModelWriter::create(path, o);
  size_t next = 0;
  for (const TensorSlot& s : w->plan()) {
    const std::vector<float> v = tensor_values(s);
    for (int64_t row = 0; row < s.rows;) {
      const int64_t count = std::min(sizes[next++ % sizes.size()], s.rows - row);
      w->write_float_rows(s, row, count, v.data() + row * s.cols);
      row += count;
    }
  }
  w->finish();
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("row-range writes in odd sizes give files byte-identical to whole-tensor writes, every format and expert type",
          "[formats]") {
  const auto dir = scratch_dir("writer_rows_identical");
  // Odd sizes that split AWQ's 8-row words in every phase; single rows; ranges that complete a word exactly.
  const std::vector<std::vector<int64_t>> patterns = {{1}, {3, 7, 5, 13, 2}, {9, 11}, {5, 3, 8, 16}, {31}};
  for (const Variant& v : kVariants) {
    INFO(v.name);
    const WriterOptions o = options_for(v);
    const auto whole = dir / (std::string("whole-") + file_format_name(v.format));
    write_model(whole.string(), o);
    const std::vector<uint8_t> expected = read_bytes(whole);
    REQUIRE(expected.size() > 10000);
    // The whole-tensor file is a valid model: the comparison is against real output, not against itself.
    REQUIRE(ModelFile::open(whole.string())->weights().layers.size() == 2);
    for (const auto& sizes : patterns) {
      INFO("range sizes starting " << sizes[0] << " (" << sizes.size() << " sizes)");
      const auto chunked = dir / "chunked.bin";
      write_in_ranges(chunked.string(), o, sizes);
      const std::vector<uint8_t> got = read_bytes(chunked);
      REQUIRE(got.size() == expected.size());
      size_t first_diff = 0;
      while (first_diff < got.size() && got[first_diff] == expected[first_diff]) ++first_diff;
      CHECK(first_diff == got.size());
    }
  }
}

TEST_CASE("chunk_rows keeps a range within the float budget, in multiples of 8 rows where possible", "[formats]") {
  TensorSlot embedding{"model.embed_tokens.weight", 151936, 1024, WeightType::Q8_0, 64};
  CHECK(chunk_rows(embedding) == 4096);  // 4 M floats / 1024
  CHECK(chunk_rows(embedding, 1000 * 1024 + 5) == 1000);
  CHECK(chunk_rows(embedding, 1003 * 1024) == 1000);  // rounded down to a multiple of 8
  CHECK(chunk_rows(embedding, 7 * 1024) == 7);         // below 8 rows: as many as fit
  CHECK(chunk_rows(embedding, 10) == 1);               // a row wider than the budget still goes through
  TensorSlot norm{"model.norm.weight", 1, 1024, WeightType::F32, 0};
  CHECK(chunk_rows(norm) == 1);
  TensorSlot small{"model.layers.0.self_attn.k_proj.weight", 24, 64, WeightType::AWQ_INT4, 32};
  CHECK(chunk_rows(small) == 24);
}

TEST_CASE("row ranges must arrive in order and complete their tensor", "[formats]") {
  const auto dir = scratch_dir("writer_rows_order");
  const auto path = dir / "m.bin";
  const WriterOptions o = options_for(kVariants[0]);
  {
    auto w = ModelWriter::create(path.string(), o);
    const auto& plan = w->plan();
    // The embedding is the first matrix slot.
    size_t i = 0;
    while (plan[i].rows == 1) {
      const std::vector<float> v = tensor_values(plan[i]);
      w->write_float(plan[i], v.data());
      ++i;
    }
    const TensorSlot& s = plan[i];
    const std::vector<float> v = tensor_values(s);
    w->write_float_rows(s, 0, 3, v.data());
    CHECK(error_of([&] { w->write_float_rows(s, 4, 2, v.data() + 4 * s.cols); })
              .find("rows [4, 6) supplied where rows [3, ...) of " + std::to_string(s.rows)) != std::string::npos);
    CHECK(error_of([&] { w->write_float_rows(s, 3, s.rows, v.data()); }).find("rows [3, ") != std::string::npos);
    CHECK(error_of([&] { w->write_float_rows(s, 3, 0, v.data()); }).find("rows [3, 3)") != std::string::npos);
    // The next slot cannot start while this one is incomplete.
    const std::vector<float> v2 = tensor_values(plan[i + 1]);
    CHECK(error_of([&] { w->write_float(plan[i + 1], v2.data()); }).find("supplied where the plan expects " + s.hf_name) !=
          std::string::npos);
    CHECK(error_of([&] { w->finish(); }).find("(3 of its " + std::to_string(s.rows) + " rows written)") !=
          std::string::npos);
    // A non-finite value is reported by its index in the whole tensor, not in the range.
    std::vector<float> bad(v.begin() + 3 * s.cols, v.begin() + 5 * s.cols);
    bad[static_cast<size_t>(s.cols) + 2] = INFINITY;
    CHECK(error_of([&] { w->write_float_rows(s, 3, 2, bad.data()); })
              .find(s.hf_name + " element " + std::to_string(4 * s.cols + 2) + " is infinite") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(dir / "m.bin.partial"));
}

TEST_CASE("packed AWQ cannot follow float rows of the same AWQ slot", "[formats]") {
  const auto dir = scratch_dir("writer_rows_awq_mix");
  WriterOptions o;
  o.format = FileFormat::AK48;
  o.config = tiny_dense();
  auto w = ModelWriter::create((dir / "m.bin").string(), o);
  const auto& plan = w->plan();
  size_t i = 0;
  while (plan[i].type != WeightType::AWQ_INT4) {
    const std::vector<float> v = tensor_values(plan[i]);
    w->write_float(plan[i], v.data());
    ++i;
  }
  const std::vector<float> v = tensor_values(plan[i]);
  w->write_float_rows(plan[i], 0, 5, v.data());
  const std::vector<int32_t> dummy(static_cast<size_t>(plan[i].rows * plan[i].cols));
  CHECK(error_of([&] {
          w->write_awq(plan[i], dummy.data(), dummy.data(), reinterpret_cast<const uint16_t*>(dummy.data()));
        }).find("packed AWQ supplied after 5 of " + std::to_string(plan[i].rows) + " rows") != std::string::npos);
}
