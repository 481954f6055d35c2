// safetensors reading and writing: round trips and clean rejection of malformed headers and checkpoints.
#include <catch2/catch.hpp>

#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "models/hf/checkpoint.h"
#include "models/hf/safetensors_file.h"
#include "models/hf/safetensors_writer.h"
#include "tests/convert/convert_test_support.h"

using namespace qt;
using namespace qt::hf;
using qt::test::convert_scratch;

namespace {

// A file made of the 8-byte length, the given header text and `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + std::string(data_bytes, '\0');
}

std::string open_error(const std::filesystem::path& p) {
  try {
    SafetensorsFile f(p.string());
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitBadInput);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors: written tensors read back with their dtypes, shapes and values", "[safetensors]") {
  auto dir = convert_scratch("st-roundtrip");
  const std::vector<float> v = {1.0f, -2.5f, 3.1415927f, 1e-3f, 65504.0f, -0.0f};
  const std::vector<int32_t> ints = {7, -8, 1 << 30};
  {
    SafetensorsWriter w((dir / "a.safetensors").string(),
                        {{"f32", DType::F32, {2, 3}}, {"f16", DType::F16, {6}}, {"bf16", DType::BF16, {3, 2}},
                         {"i32", DType::I32, {3}}, {"empty", DType::F32, {0, 4}}},
                        {{"format", "pt"}});
    w.write_float("f32", v.data(), 6);
    w.write_float("f16", v.data(), 3);  // a tensor may arrive in parts
    w.write_float("f16", v.data() + 3, 3);
    w.write_float("bf16", v.data(), 6);
    w.write("i32", ints.data(), 12);
    w.write("empty", nullptr, 0);
    w.finish();
  }
  SafetensorsFile f((dir / "a.safetensors").string());
  CHECK(f.metadata().at("format") == "pt");
  REQUIRE(f.tensors().size() == 5);
  const TensorInfo* t = f.find("bf16");
  REQUIRE(t);
  CHECK(t->dtype == DType::BF16);
  CHECK(t->shape == std::vector<int64_t>{3, 2});
  std::vector<float> out(6);
  f.read_float(*f.find("f32"), 0, 6, out.data());
  CHECK(std::memcmp(out.data(), v.data(), 24) == 0);
  f.read_float(*f.find("f16"), 0, 6, out.data());
  for (int i = 0; i < 6; ++i) CHECK(out[i] == round_to_half(v[i]));
  f.read_float(*t, 2, 3, out.data());
  for (int i = 0; i < 3; ++i) CHECK(out[i] == bf16_bits_to_float(float_to_bf16_bits(v[2 + i])));
  int32_t back[3];
  std::memcpy(back, f.data(*f.find("i32")), 12);
  CHECK(back[2] == (1 << 30));
  // The data area starts 8-byte aligned, as the reference writer pads the header.
  CHECK(f.find("f32")->offset % 8 == 0);
  // Integer tensors cannot be read as weights.
  CHECK_THROWS_WITH(f.read_float(*f.find("i32"), 0, 3, out.data()), Catch::Contains("'i32'") && Catch::Contains("I32"));
  CHECK_THROWS_WITH(f.read_float(*f.find("f32"), 4, 3, out.data()), Catch::Contains("outside"));
}

TEST_CASE("safetensors: the writer refuses out-of-order, oversized and incomplete tensors", "[safetensors]") {
  auto dir = convert_scratch("st-writer-errors");
  const float x[4] = {1, 2, 3, 4};
  {
    SafetensorsWriter w((dir / "w.safetensors").string(), {{"a", DType::F32, {2}}, {"b", DType::F32, {2}}});
    CHECK_THROWS_WITH(w.write_float("b", x, 2), Catch::Contains("'b' written where 'a'"));
    CHECK_THROWS_WITH(w.write_float("a", x, 4), Catch::Contains("16 bytes given, 8 declared"));
    w.write_float("a", x, 2);
    CHECK_THROWS_WITH(w.finish(), Catch::Contains("1 of 2"));
  }
  // Destroyed without a successful finish(): the partial file is removed.
  CHECK_FALSE(std::filesystem::exists(dir / "w.safetensors"));
}

TEST_CASE("safetensors: malformed headers are rejected with the file and tensor named", "[safetensors]") {
  auto dir = convert_scratch("st-malformed");
  struct Case {
    const char* name;
    std::string bytes;
    std::vector<std::string> expect;
  };
  const std::string good_entry = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  std::string huge_len(8, '\0');
  huge_len[7] = 0x7f;
  const std::vector<Case> cases = {
      {"short", std::string("\x05\x00\x00", 3), {"shorter than the 8-byte header length"}},
      {"truncated-header", raw_file(good_entry, 16).substr(0, 30), {"runs past the end"}},
      {"huge-header-length", huge_len + "{}", {"exceeds"}},
      {"not-json", raw_file("{\"w\": [", 0), {"not valid JSON"}},
      {"not-object", raw_file("[1, 2, 3]", 0), {"not a JSON object"}},
      {"bad-dtype", raw_file(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8), {"'w'", "unknown dtype 'F33'"}},
      {"missing-dtype", raw_file(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8), {"'w'", "dtype"}},
      {"offsets-past-end", raw_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 12), {"'w'", "outside the data area"}},
      {"offsets-reversed", raw_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), {"'w'", "end before"}},
      {"size-mismatch", raw_file(R"({"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,16]}})", 16), {"'w'", "needs 4 x 2"}},
      {"negative-dim", raw_file(R"({"w":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})", 16), {"'w'", "non-negative"}},
      {"huge-shape", raw_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", 16), {"'w'", "more bytes than the file"}},
      {"bad-offsets", raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), {"'w'", "two integers"}},
      {"overlap", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), {"'a'", "'b'", "overlap"}},
      // An empty tensor between two overlapping ones must not hide the overlap.
      {"overlap-past-empty", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"c":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16), {"'a'", "'c'", "overlap"}},
      {"bad-metadata", raw_file(R"({"__metadata__":{"format":3}})", 0), {"__metadata__"}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const auto path = dir / (std::string(c.name) + ".safetensors");
    qt::test::put_bytes(path, c.bytes);
    const std::string msg = open_error(path);
    CHECK(msg.find(path.string()) == 0);
    for (const auto& e : c.expect) CHECK_THAT(msg, Catch::Contains(e));
  }
}

TEST_CASE("safetensors: sharded checkpoints resolve names through the index and reject inconsistent ones", "[safetensors]") {
  auto dir = convert_scratch("st-sharded");
  const float x[2] = {1, 2};
  auto shard = [&](const std::string& file, const std::string& tensor) {
    SafetensorsWriter w((dir / file).string(), {{tensor, DType::F32, {2}}});
    w.write_float(tensor, x, 2);
    w.finish();
  };
  shard("s1.safetensors", "a");
  shard("s2.safetensors", "b");
  auto index = [&](const std::string& map) {
    qt::test::put_bytes(dir / "model.safetensors.index.json", R"({"metadata":{"total_size":16},"weight_map":)" + map + "}");
  };
  index(R"({"a":"s1.safetensors","b":"s2.safetensors"})");
  {
    HfCheckpoint ck(dir.string());
    CHECK(ck.files().size() == 2);
    CHECK(ck.get("b").file->path() == (dir / "s2.safetensors").string());
    CHECK_FALSE(ck.find("c"));
    CHECK_THROWS_WITH(ck.get("c"), Catch::Contains("'c' not found"));
    CHECK(ck.total_tensor_bytes() == 16);
  }
  auto error = [&]() -> std::string {
    try {
      HfCheckpoint ck(dir.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  index(R"({"a":"s1.safetensors","b":"s1.safetensors"})");
  CHECK_THAT(error(), Catch::Contains("'b' is listed") && Catch::Contains("s1.safetensors"));
  index(R"({"a":"s1.safetensors","b":"missing.safetensors"})");
  CHECK_THAT(error(), Catch::Contains("missing.safetensors") && Catch::Contains("cannot open"));
  index(R"({"a":"../s1.safetensors"})");
  CHECK_THAT(error(), Catch::Contains("invalid shard file"));
  index(R"({"a":"s1.safetensors","b":3})");
  CHECK_THAT(error(), Catch::Contains("'b'"));
  index("[]");
  CHECK_THAT(error(), Catch::Contains("weight_map"));
  shard("s2.safetensors", "a");  // the same tensor in two shards
  index(R"({"a":"s1.safetensors","b":"s2.safetensors"})");
  CHECK_THAT(error(), Catch::Contains("'a' is also stored"));
  std::filesystem::remove(dir / "model.safetensors.index.json");
  CHECK_THAT(error(), Catch::Contains("no model.safetensors"));
}
