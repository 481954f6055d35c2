#include "tests/tokenizer/golden_data.h"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include "common/paths.h"

namespace qt::tok::test {

std::string data_path(const std::string& name) { return qt::source_root() + "/tests/tokenizer/data/" + name; }
std::string tokenizer_dir() { return qt::source_root() + "/models/tokenizers/qwen3"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::load(tokenizer_dir());
  return t;
}

nlohmann::json load_json(const std::string& name) { return nlohmann::json::parse(read_file(data_path(name))); }

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

namespace {

struct Reader {
  const std::string& buf;
  size_t pos = 0;
  uint32_t u32() {
    if (pos + 4 > buf.size()) throw std::runtime_error("encode_corpus.bin truncated");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(buf[pos + static_cast<size_t>(i)])) << (8 * i);
    pos += 4;
    return v;
  }
  std::string bytes(size_t n) {
    if (pos + n > buf.size()) throw std::runtime_error("encode_corpus.bin truncated");
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
  uint32_t uleb() {
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (pos >= buf.size()) throw std::runtime_error("encode_corpus.bin truncated");
      auto b = static_cast<unsigned char>(buf[pos++]);
      v |= static_cast<uint32_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("encode_corpus.bin: bad varint");
  }
};

}  // namespace

const std::vector<CorpusDoc>& corpus() {
  static const std::vector<CorpusDoc> docs = [] {
    std::string buf = read_file(data_path("encode_corpus.bin"));
    if (buf.compare(0, 6, "QTKG1\n") != 0) throw std::runtime_error("encode_corpus.bin: bad magic");
    Reader r{buf, 6};
    uint32_t count = r.u32();
    std::vector<CorpusDoc> out(count);
    for (auto& d : out) {
      uint32_t flags = r.u32();
      d.text = r.bytes(r.u32());
      d.expected_decode = (flags & 1) ? r.bytes(r.u32()) : d.text;
      uint32_t n = r.u32();
      d.ids.resize(n);
      for (auto& id : d.ids) id = static_cast<int32_t>(r.uleb());
    }
    if (r.pos != buf.size()) throw std::runtime_error("encode_corpus.bin: trailing bytes");
    return out;
  }();
  return docs;
}

}  // namespace qt::tok::test
