#include "models/tokenizer/qwen3c.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "common/error.h"
#include "common/mapped_file.h"

namespace qt::tok {
namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// Longest token qwen3.c will ever see; a larger length field means a corrupt file, not a real token.
constexpr uint32_t kMaxTokenBytes = 1u << 16;

}  // namespace

Qwen3cTokenizer to_qwen3c(const Tokenizer& tokenizer, int64_t bos_id, int64_t eos_id) {
  Qwen3cTokenizer t;
  const int32_t n = tokenizer.vocab_size();
  int64_t bos = bos_id >= 0 ? bos_id : tokenizer.bos_id();
  int64_t eos = eos_id >= 0 ? eos_id : (tokenizer.im_end_id() >= 0 ? tokenizer.im_end_id() : tokenizer.eos_id());
  if (bos < 0 || eos < 0) throw Error(tokenizer.source() + ": the tokenizer defines no bos/eos token; pass them explicitly");
  t.bos_id = static_cast<uint32_t>(bos);
  t.eos_id = static_cast<uint32_t>(eos);
  t.max_token_length = tokenizer.max_token_length();
  // The exporter keys ranks by the merged string (a dict comprehension, so the last merge yielding a
  // string wins) and looks up every token string, added tokens included.
  std::unordered_map<std::string, int32_t> rank_of;
  const auto& merges = tokenizer.merges();
  rank_of.reserve(merges.size() * 2);
  for (size_t r = 0; r < merges.size(); ++r) rank_of[merges[r].first + merges[r].second] = static_cast<int32_t>(r);
  t.scores.resize(static_cast<size_t>(n));
  t.tokens.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    auto name = tokenizer.id_to_token(id);
    if (!name) throw Error(tokenizer.source() + ": id " + std::to_string(id) + " has no token; the qwen3.c format needs contiguous ids");
    auto it = rank_of.find(*name);
    t.scores[static_cast<size_t>(id)] = it != rank_of.end() ? static_cast<float>(-std::log(static_cast<double>(it->second) + 1.0)) : -1e6f;
    t.tokens[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
  }
  return t;
}

std::vector<uint8_t> serialize_qwen3c_tokenizer(const Qwen3cTokenizer& table) {
  if (table.scores.size() != table.tokens.size()) throw Error("qwen3.c tokenizer table: scores and tokens differ in count");
  std::vector<uint8_t> out;
  size_t total = 12;
  for (const auto& s : table.tokens) total += 8 + s.size();
  out.reserve(total);
  put_u32(out, table.max_token_length);
  put_u32(out, table.bos_id);
  put_u32(out, table.eos_id);
  for (size_t i = 0; i < table.tokens.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &table.scores[i], 4);
    put_u32(out, bits);
    put_u32(out, static_cast<uint32_t>(table.tokens[i].size()));
    out.insert(out.end(), table.tokens[i].begin(), table.tokens[i].end());
  }
  return out;
}

void write_qwen3c_tokenizer(const Qwen3cTokenizer& table, const std::string& path) {
  std::vector<uint8_t> bytes = serialize_qwen3c_tokenizer(table);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail_file(path, "cannot create the qwen3.c tokenizer file", kExitFailure);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail_file(path, "write failed", kExitFailure);
}

void write_qwen3c_tokenizer(const Tokenizer& tokenizer, const std::string& path, int64_t bos_id, int64_t eos_id) {
  write_qwen3c_tokenizer(to_qwen3c(tokenizer, bos_id, eos_id), path);
}

Qwen3cTokenizer parse_qwen3c_tokenizer(const uint8_t* data, size_t size, const std::string& origin, int64_t expected_count) {
  if (size < 12) fail_file(origin, "qwen3.c tokenizer is " + std::to_string(size) + " bytes, shorter than its 12-byte header");
  Qwen3cTokenizer t;
  t.max_token_length = get_u32(data);
  t.bos_id = get_u32(data + 4);
  t.eos_id = get_u32(data + 8);
  size_t pos = 12;
  while (pos < size && (expected_count < 0 || static_cast<int64_t>(t.tokens.size()) < expected_count)) {
    size_t index = t.tokens.size();
    if (size - pos < 8) fail_file(origin, "entry " + std::to_string(index) + " is truncated (header needs 8 bytes, " + std::to_string(size - pos) + " left)");
    float score;
    std::memcpy(&score, data + pos, 4);
    uint32_t len = get_u32(data + pos + 4);
    pos += 8;
    if (len > kMaxTokenBytes) fail_file(origin, "entry " + std::to_string(index) + " claims " + std::to_string(len) + " bytes");
    if (len > size - pos) fail_file(origin, "entry " + std::to_string(index) + " is truncated (" + std::to_string(len) + " bytes, " + std::to_string(size - pos) + " left)");
    // max_token_length counts code points of the token as tokenizer.json spells it; each is at most 4 bytes.
    if (len > 4 * static_cast<uint64_t>(t.max_token_length))
      fail_file(origin, "entry " + std::to_string(index) + " is longer than max_token_length allows");
    t.scores.push_back(score);
    t.tokens.emplace_back(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
  }
  if (expected_count >= 0 && static_cast<int64_t>(t.tokens.size()) != expected_count)
    fail_file(origin, "has " + std::to_string(t.tokens.size()) + " entries, expected " + std::to_string(expected_count));
  if (pos != size) fail_file(origin, std::to_string(size - pos) + " trailing bytes after the last entry");
  if (t.tokens.empty()) fail_file(origin, "qwen3.c tokenizer has no entries");
  if (t.bos_id >= t.tokens.size() || t.eos_id >= t.tokens.size())
    fail_file(origin, "bos/eos id (" + std::to_string(t.bos_id) + "/" + std::to_string(t.eos_id) + ") outside the " + std::to_string(t.tokens.size()) + " entries");
  return t;
}

Qwen3cTokenizer read_qwen3c_tokenizer(const std::string& path, int64_t expected_count) {
  MappedFile f(path);
  return parse_qwen3c_tokenizer(f.data(), f.size(), path, expected_count);
}

}  // namespace qt::tok
