// Loading tokenizer.json (+ tokenizer_config.json) into Tokenizer::Impl, refusing anything this
// implementation would not reproduce exactly (other model types, byte fallback, unknown normalizers).
#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/paths.h"
#include "models/tokenizer/tokenizer_impl.h"
#include "models/tokenizer/utf8.h"

namespace qt::tok {
namespace {

using nlohmann::json;

// FNV-1a 64 of the chat_template string in Qwen3's tokenizer_config.json (sha256 aeb13307... release).
constexpr uint64_t kQwen3TemplateHash = 0x2bfdb7aa9754484eull;

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::atomic<uint64_t> g_instances{1};

[[noreturn]] void bad(const std::string& origin, const std::string& what) { fail_file(origin, what); }

// Ids index dense per-id tables, so a corrupt id such as 2^31 must be an error, not a 64 GB allocation
// (or an int overflow); real vocabularies stay far below 2^24.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

int32_t token_id(const json& v, const std::string& what, const std::string& origin) {
  const bool ok = v.is_number_unsigned()  ? v.get<uint64_t>() <= static_cast<uint64_t>(kMaxTokenId)
                  : v.is_number_integer() ? v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId
                                          : false;
  if (!ok) bad(origin, what + " has id " + v.dump() + "; ids must be integers in [0, " + std::to_string(kMaxTokenId) + "]");
  return static_cast<int32_t>(v.get<int64_t>());
}

std::string read_file(const std::string& path) {
  // A FIFO would block the read, a folder read as empty.
  if (const std::string why = regular_file_problem(path); !why.empty()) fail_file(path, "tokenizer file: " + why);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_file(path, "cannot open tokenizer file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail_file(path, "read error");
  return ss.str();
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string dir_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  return pos == std::string::npos ? std::string(".") : path.substr(0, pos);
}


std::string json_string_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  // tokenizer_config sometimes spells a token as {"content": "...", ...}.
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return {};
}

void check_pre_tokenizer(const json& pre, Tokenizer::Impl& impl, const std::string& origin) {
  if (pre.is_null()) return;
  std::vector<json> steps;
  if (pre.value("type", "") == "Sequence") {
    for (const auto& s : pre.at("pretokenizers")) steps.push_back(s);
  } else {
    steps.push_back(pre);
  }
  bool byte_level = false;
  for (const auto& s : steps) {
    std::string type = s.value("type", "");
    if (type == "Split") {
      if (impl.split_regex) bad(origin, "more than one Split pre-tokenizer is not supported");
      if (s.value("behavior", "") != "Isolated" || s.value("invert", false))
        bad(origin, "Split pre-tokenizer must have behavior Isolated and invert false");
      if (!s.contains("pattern") || !s["pattern"].contains("Regex"))
        bad(origin, "Split pre-tokenizer needs a Regex pattern");
      try {
        impl.split_regex = std::make_unique<Regex>(s["pattern"]["Regex"].get<std::string>());
      } catch (const Error& e) {
        bad(origin, e.what());
      }
    } else if (type == "ByteLevel") {
      if (s.value("add_prefix_space", false)) bad(origin, "ByteLevel add_prefix_space=true is not supported");
      if (s.value("use_regex", true)) bad(origin, "ByteLevel use_regex=true is not supported (use a Split step)");
      byte_level = true;
    } else {
      bad(origin, "unsupported pre-tokenizer type '" + type + "'");
    }
  }
  if (!byte_level) bad(origin, "only byte-level BPE tokenizers are supported (no ByteLevel pre-tokenizer)");
}

void load_model(const json& model, Tokenizer::Impl& impl, const std::string& origin) {
  if (model.value("type", "") != "BPE") bad(origin, "model type must be BPE");
  if (model.contains("dropout") && !model["dropout"].is_null()) bad(origin, "BPE dropout is not supported");
  if (model.value("byte_fallback", false)) bad(origin, "BPE byte_fallback is not supported");
  auto nonempty = [&](const char* k) {
    return model.contains(k) && model[k].is_string() && !model[k].get<std::string>().empty();
  };
  if (nonempty("continuing_subword_prefix") || nonempty("end_of_word_suffix"))
    bad(origin, "BPE subword prefixes/suffixes are not supported");
  impl.ignore_merges = model.value("ignore_merges", false);

  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) bad(origin, "model.vocab must be an object");
  int32_t max_id = -1;
  for (const auto& [tok, idj] : vocab.items()) max_id = std::max(max_id, token_id(idj, "vocabulary token '" + tok + "'", origin));
  impl.bytes.assign(static_cast<size_t>(max_id + 1), {});
  impl.kind.assign(static_cast<size_t>(max_id + 1), kNone);
  impl.bpe_by_bytes.reserve(vocab.size() * 2);
  std::unordered_map<std::string, int32_t> by_name;  // vocab strings as spelled in the file, for the merges
  by_name.reserve(vocab.size() * 2);
  for (const auto& [tok, idj] : vocab.items()) {
    const int32_t id = idj.get<int32_t>();  // range-checked by token_id above
    by_name.emplace(tok, id);
    auto raw = alphabet_to_bytes(tok);
    if (!raw) bad(origin, "vocabulary token '" + tok + "' is not in the byte-level alphabet");
    // One id, one token: encode would emit the id for text that decodes to the other token.
    if (impl.kind[static_cast<size_t>(id)] == kBpe)
      bad(origin, "vocabulary tokens share id " + std::to_string(id) + " ('" + tok + "' and another)");
    impl.bytes[static_cast<size_t>(id)] = *raw;
    impl.kind[static_cast<size_t>(id)] = kBpe;
    impl.max_token_length = std::max<uint32_t>(impl.max_token_length, static_cast<uint32_t>(utf8::count_code_points(tok)));
    impl.bpe_by_bytes.emplace(std::move(*raw), id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = impl.bpe_by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == impl.bpe_by_bytes.end()) bad(origin, "vocabulary lacks the token for byte " + std::to_string(b));
    impl.byte_ids[static_cast<size_t>(b)] = it->second;
  }

  const json& merges = model.at("merges");
  std::vector<std::pair<int32_t, int32_t>> pairs;
  std::vector<int32_t> merged;
  pairs.reserve(merges.size());
  merged.reserve(merges.size());
  impl.merge_strings.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    std::string a, b;
    if (m.is_array() && m.size() == 2) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else if (m.is_string()) {
      const std::string s = m.get<std::string>();
      auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        bad(origin, "merge " + std::to_string(r) + " is not two tokens: '" + s + "'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      bad(origin, "merge " + std::to_string(r) + " is malformed");
    }
    auto ia = by_name.find(a), ib = by_name.find(b), ic = by_name.find(a + b);
    if (ia == by_name.end() || ib == by_name.end() || ic == by_name.end())
      bad(origin, "merge " + std::to_string(r) + " ('" + a + "', '" + b + "') uses a token missing from the vocabulary");
    pairs.emplace_back(ia->second, ib->second);
    merged.push_back(ic->second);
    impl.merge_strings.emplace_back(std::move(a), std::move(b));
  }
  impl.merges.build(pairs, merged);
}

void load_added(const json& added, Tokenizer::Impl& impl, const std::string& origin) {
  if (added.is_null()) return;
  for (const auto& a : added) {
    AddedToken t;
    t.content = a.at("content").get<std::string>();
    t.id = token_id(a.at("id"), "added token '" + t.content + "'", origin);
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.normalized = a.value("normalized", !t.special);
    t.single_word = a.value("single_word", false);
    if (t.content.empty() || utf8::first_invalid(t.content) != t.content.size()) bad(origin, "added token with id " + std::to_string(t.id) + " has empty or invalid content");
    impl.added.push_back(std::move(t));
  }
  int32_t max_id = static_cast<int32_t>(impl.bytes.size()) - 1;
  for (const auto& t : impl.added) max_id = std::max(max_id, t.id);
  impl.bytes.resize(static_cast<size_t>(max_id + 1));
  impl.kind.resize(static_cast<size_t>(max_id + 1), kNone);
  std::vector<const AddedToken*> raw, norm;
  std::vector<bool> added_id(impl.bytes.size(), false);
  for (const auto& t : impl.added) {
    // An added token may name a vocabulary token by its id (the same text), never give that id another text.
    const size_t i = static_cast<size_t>(t.id);
    if (added_id[i]) bad(origin, "added tokens share id " + std::to_string(t.id) + " ('" + t.content + "' and another)");
    added_id[i] = true;
    if (impl.kind[i] == kBpe && impl.bytes[i] != t.content)
      bad(origin, "added token '" + t.content + "' takes id " + std::to_string(t.id) +
                      ", which the vocabulary gives to another token");
    impl.bytes[static_cast<size_t>(t.id)] = t.content;
    impl.kind[static_cast<size_t>(t.id)] = t.special ? kSpecial : kAdded;
    impl.added_by_content[t.content] = t.id;
    impl.max_token_length = std::max<uint32_t>(impl.max_token_length, static_cast<uint32_t>(utf8::count_code_points(t.content)));
    (t.normalized && impl.nfc ? norm : raw).push_back(&t);
  }
  impl.raw_matcher.build(raw);
  impl.norm_matcher.build(norm);
}

void load_config(const json& cfg, Tokenizer::Impl& impl) {
  auto id_of = [&](const std::string& content) -> int32_t {
    if (content.empty()) return -1;
    auto it = impl.added_by_content.find(content);
    if (it != impl.added_by_content.end()) return it->second;
    auto jt = impl.bpe_by_bytes.find(content);
    return jt == impl.bpe_by_bytes.end() ? -1 : jt->second;
  };
  impl.eos = id_of(json_string_field(cfg, "eos_token"));
  int32_t bos = id_of(json_string_field(cfg, "bos_token"));
  if (bos >= 0) impl.bos = bos;
  impl.pad = id_of(json_string_field(cfg, "pad_token"));
  if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
    impl.chat_template = cfg["chat_template"].get<std::string>();
    impl.chat_template_qwen3 = fnv1a(impl.chat_template) == kQwen3TemplateHash;
  }
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json, const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  impl->source = origin;
  impl->instance = g_instances.fetch_add(1);
  json j;
  try {
    j = json::parse(tokenizer_json);
  } catch (const json::exception& e) {
    bad(origin, std::string("not valid JSON: ") + e.what());
  }
  try {
    const json& norm = j.contains("normalizer") ? j["normalizer"] : json();
    if (norm.is_null()) {
      impl->nfc = false;
    } else if (norm.value("type", "") == "NFC") {
      impl->nfc = true;
    } else {
      bad(origin, "unsupported normalizer '" + norm.value("type", std::string("?")) + "' (only NFC or none)");
    }
    check_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), *impl, origin);
    load_model(j.at("model"), *impl, origin);
    load_added(j.contains("added_tokens") ? j["added_tokens"] : json(), *impl, origin);
  } catch (const json::exception& e) {
    bad(origin, std::string("unexpected structure: ") + e.what());
  }
  auto find = [&](const char* content) {
    auto it = impl->added_by_content.find(content);
    return it == impl->added_by_content.end() ? -1 : it->second;
  };
  impl->endoftext = find("<|endoftext|>");
  impl->im_start = find("<|im_start|>");
  impl->im_end = find("<|im_end|>");
  impl->think = find("<think>");
  impl->end_think = find("</think>");
  impl->bos = impl->endoftext;
  impl->eos = impl->im_end >= 0 ? impl->im_end : impl->endoftext;
  if (!config_json.empty()) {
    try {
      load_config(json::parse(config_json), *impl);
    } catch (const json::exception& e) {
      bad(origin, std::string("tokenizer_config.json is not valid: ") + e.what());
    }
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::string file = is_directory(path) ? path + "/tokenizer.json" : path;
  std::string text = read_file(file);
  std::string config_path = dir_of(file) + "/tokenizer_config.json";
  std::string config = file_exists(config_path) ? read_file(config_path) : std::string();
  return from_json(text, config, file);
}

Tokenizer load_default_tokenizer() { return Tokenizer::load(default_hf_tokenizer_path()); }

const std::array<uint32_t, 256>& byte_to_code_point() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

int byte_of_code_point(uint32_t cp) {
  static const std::vector<int16_t> inverse = [] {
    std::vector<int16_t> v(324, -1);
    const auto& t = byte_to_code_point();
    for (int b = 0; b < 256; ++b) v[t[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return v;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

std::optional<std::string> alphabet_to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  const auto* s = reinterpret_cast<const unsigned char*>(token.data());
  size_t n = token.size(), i = 0;
  while (i < n) {
    size_t len = utf8::sequence_length(s, n, i);
    // The alphabet's code points all lie below U+0144, so a valid character of it takes one or two bytes.
    if (len == 0 || len > 2) return std::nullopt;
    const uint32_t cp = len == 1 ? s[i] : (((s[i] & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu));
    int b = byte_of_code_point(cp);
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return out;
}

}  // namespace qt::tok
