// Qwen3's chat_template written out by hand. Each branch mirrors one construct of the Jinja template in
// tokenizer_config.json; the Python string methods it calls (split, strip('\n'), startswith) are
// reproduced exactly because they decide where reasoning starts and ends.
#include "models/tokenizer/chat.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::tok {
namespace {

std::string_view lstrip_newlines(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && s[i] == '\n') ++i;
  return s.substr(i);
}
std::string_view rstrip_newlines(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && s[n - 1] == '\n') --n;
  return s.substr(0, n);
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  size_t p = s.find(sep);
  return p == std::string_view::npos ? s : s.substr(0, p);
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  size_t p = s.rfind(sep);
  return p == std::string_view::npos ? s : s.substr(p + sep.size());
}

bool is_tool_response(const std::string& c) {
  constexpr std::string_view open = "<tool_response>", close = "</tool_response>";
  return c.size() >= open.size() && c.compare(0, open.size(), open) == 0 && c.size() >= close.size() &&
         c.compare(c.size() - close.size(), close.size(), close) == 0;
}

}  // namespace

std::string render_chat(std::span<const ChatMessage> messages, const ChatOptions& options) {
  // transformers refuses an empty conversation before rendering; so does the C++ path.
  if (messages.empty()) throw Error("conversation: no messages (transformers refuses an empty conversation)");
  std::string out;
  const size_t n = messages.size();
  const bool first_is_system = n > 0 && messages[0].role == "system";
  if (!options.tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) out += messages[0].content + "\n\n";
    out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& t : options.tools) out += "\n" + t;
    out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (first_is_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }

  // The last real user query: reasoning is kept only for assistant turns after it.
  size_t last_query = n == 0 ? 0 : n - 1;
  bool multi_step_tool = true;
  for (size_t k = n; k-- > 0;) {
    const ChatMessage& m = messages[k];
    if (multi_step_tool && m.role == "user" && !is_tool_response(m.content)) {
      multi_step_tool = false;
      last_query = k;
    }
  }
  // Jinja's `messages|length - 1` is -1 for an empty list; with no messages the loop below does nothing.

  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == n;
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (content.find("</think>") != std::string_view::npos) {
        std::string_view full = m.content;
        content = lstrip_newlines(after_last(full, "</think>"));
        reasoning = lstrip_newlines(after_last(rstrip_newlines(before_first(full, "</think>")), "<think>"));
      }
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<|im_start|>" + m.role + "\n<think>\n";
        out += strip_newlines(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_newlines(content);
      } else {
        out += "<|im_start|>" + m.role + "\n";
        out += content;
      }
      for (size_t t = 0; t < m.tool_calls.size(); ++t) {
        if ((t == 0 && !content.empty()) || t > 0) out += "\n";
        out += "<tool_call>\n{\"name\": \"" + m.tool_calls[t].name + "\", \"arguments\": " + m.tool_calls[t].arguments +
               "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

namespace {

using ojson = nlohmann::ordered_json;

void append_json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Python's repr(float), which json.dumps uses: the shortest digits that round-trip, in positional notation
// while the decimal point falls within 16 digits left of and 4 zeros right of them (1e16 -> "1e+16",
// 0.0001 -> "0.0001", 1e-05 -> "1e-05"), ".0" on integral values, a signed exponent of at least two digits.
std::string python_float_repr(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  std::string out = std::signbit(d) ? "-" : "";
  if (d == 0) return out + "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(d), std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // d.ddde[+-]XX
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, 1) + (e > 1 ? sci.substr(2, e - 2) : "");
  int exponent = std::atoi(sci.c_str() + e + 1);
  int point = exponent + 1;  // digits are 0.DIGITS x 10^point
  int nd = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) return out + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    if (point >= nd) return out + digits + std::string(static_cast<size_t>(point - nd), '0') + ".0";
    return out + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  }
  out += digits.substr(0, 1);
  if (nd > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + ebuf;
}

// What Python's json.loads makes of a number literal, printed back by json.dumps: integers exactly at any
// width (a negative zero is 0), other literals as floats (inf past the double range), NaN / Infinity as is.
std::string python_number(const std::string& raw) {
  if (raw == "NaN" || raw == "Infinity" || raw == "-Infinity") return raw;
  if (raw.find_first_of(".eE") == std::string::npos) {
    return raw.find_first_not_of("-0") == std::string::npos ? "0" : raw;
  }
  return python_float_repr(std::strtod(raw.c_str(), nullptr));
}

// json.dumps(x, ensure_ascii=False): ", " and ": " separators, insertion order, Python float repr.
void append_python_json(const ojson& v, std::string& out) {
  switch (v.type()) {
    case ojson::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_json_string(k, out);
        out += ": ";
        append_python_json(x, out);
      }
      out += '}';
      break;
    }
    case ojson::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        append_python_json(v[i], out);
      }
      out += ']';
      break;
    }
    case ojson::value_t::string: append_json_string(v.get<std::string>(), out); break;
    case ojson::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case ojson::value_t::null: out += "null"; break;
    case ojson::value_t::number_float: out += python_float_repr(v.get<double>()); break;
    case ojson::value_t::binary: {
      // A number literal kept as written (see parse_python_json).
      const auto& raw = v.get_binary();
      out += python_number(std::string(raw.begin(), raw.end()));
      break;
    }
    default: out += v.dump(); break;
  }
}

// The number literals of a JSON text in document order, as written, and the text with the ones nlohmann
// cannot parse (Python json's NaN / Infinity / -Infinity, and floats past the double range, which Python
// reads as inf) replaced by 0. Strings are skipped; text that is not JSON is left for the parser to reject.
struct NumberScan {
  std::string text;
  std::vector<std::string> literals;
};

NumberScan scan_numbers(std::string_view in) {
  NumberScan s;
  s.text.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    char c = in[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < in.size() && in[j] != '"') j += in[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, in.size());
      s.text.append(in.substr(i, j - i));
      i = j;
      continue;
    }
    bool word = false;
    for (std::string_view w : {"NaN", "Infinity", "-Infinity"}) {
      if (in.substr(i, w.size()) == w) {
        s.literals.emplace_back(w);
        s.text += '0';
        i += w.size();
        word = true;
        break;
      }
    }
    if (word) continue;
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i + 1;
      while (j < in.size() && (std::isdigit(static_cast<unsigned char>(in[j])) || in[j] == '.' || in[j] == 'e' ||
                               in[j] == 'E' || in[j] == '+' || in[j] == '-'))
        ++j;
      std::string lit(in.substr(i, j - i));
      bool is_float = lit.find_first_of(".eE") != std::string::npos;
      bool overflows = is_float && std::isinf(std::strtod(lit.c_str(), nullptr));
      s.text += overflows ? std::string(lit[0] == '-' ? "-0" : "0") : lit;
      s.literals.push_back(std::move(lit));
      i = j;
      continue;
    }
    s.text += c;
    ++i;
  }
  return s;
}

// Builds an ordered_json in which every number is a binary value holding its literal as written, so
// json.dumps' output (exact big integers, Python float repr) can be produced from what the user wrote.
class RawNumberSax : public nlohmann::json_sax<ojson> {
 public:
  static constexpr size_t kMaxNesting = 256;
  explicit RawNumberSax(std::vector<std::string> literals) : literals_(std::move(literals)) {}
  ojson result;

  bool null() override { return put(nullptr); }
  bool boolean(bool b) override { return put(b); }
  bool number_integer(number_integer_t) override { return number(); }
  bool number_unsigned(number_unsigned_t) override { return number(); }
  bool number_float(number_float_t, const string_t&) override { return number(); }
  bool string(string_t& s) override { return put(s); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(ojson::object()); }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(ojson::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  bool number() {
    if (next_ >= literals_.size()) {
      error_ = "number literals out of step with the parser";
      return false;
    }
    const std::string& lit = literals_[next_++];
    return put(ojson::binary(std::vector<uint8_t>(lit.begin(), lit.end())));
  }
  bool put(ojson v) {
    if (stack_.empty()) {
      result = std::move(v);
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
    } else {
      (*stack_.back())[key_] = std::move(v);
    }
    return true;
  }
  bool open(ojson v) {
    // Deeper than any conversation is (the tools' JSON schemas nest a few levels): refused before the
    // recursive serialization of the tools could exhaust the stack.
    if (stack_.size() >= kMaxNesting) {
      error_ = "nested more than " + std::to_string(kMaxNesting) + " levels deep";
      return false;
    }
    put(std::move(v));
    ojson* where = stack_.empty() ? &result : stack_.back()->is_array() ? &stack_.back()->back() : &(*stack_.back())[key_];
    stack_.push_back(where);
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  std::vector<std::string> literals_;
  size_t next_ = 0;
  std::vector<ojson*> stack_;
  std::string key_;
  std::string error_;
};

// Parses JSON as Python's json.loads reads it (NaN/Infinity accepted, numbers kept as written).
ojson parse_ordered(std::string_view text, const char* what) {
  NumberScan scan = scan_numbers(text);
  RawNumberSax sax(std::move(scan.literals));
  bool ok = false;
  try {
    ok = ojson::sax_parse(scan.text, &sax);
  } catch (const ojson::exception& e) {
    throw Error(std::string(what) + " is not valid JSON: " + e.what());
  }
  if (!ok) throw Error(std::string(what) + " is not valid JSON: " + sax.error());
  return std::move(sax.result);
}

std::string field_string(const ojson& m, const char* key, const std::string& where, bool required) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) {
    if (required) throw Error(where + ": missing \"" + key + "\"");
    return {};
  }
  if (!it->is_string()) throw Error(where + ": \"" + key + "\" must be a string");
  return it->get<std::string>();
}

}  // namespace

std::string to_template_json(std::string_view json_text) {
  std::string out;
  append_python_json(parse_ordered(json_text, "tool JSON"), out);
  return out;
}

Conversation parse_conversation_json(std::string_view json_text) {
  ojson root = parse_ordered(json_text, "conversation");
  Conversation conv;
  const ojson* msgs = &root;
  if (root.is_object()) {
    if (!root.contains("messages")) throw Error("conversation: object needs a \"messages\" array");
    msgs = &root["messages"];
    if (root.contains("tools") && !root["tools"].is_null()) {
      if (!root["tools"].is_array()) throw Error("conversation: \"tools\" must be an array");
      for (const auto& t : root["tools"]) {
        std::string s;
        append_python_json(t, s);
        conv.tools.push_back(std::move(s));
      }
    }
  }
  if (!msgs->is_array()) throw Error("conversation: messages must be an array");
  if (msgs->empty()) throw Error("conversation: no messages (transformers refuses an empty conversation)");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    std::string where = "conversation: message " + std::to_string(i);
    if (!m.is_object()) throw Error(where + " is not an object");
    ChatMessage cm;
    cm.role = field_string(m, "role", where, true);
    // The template reads message.content for every role; transformers raises when it is missing or null,
    // also for an assistant turn that only calls tools.
    auto content = m.find("content");
    if (content == m.end() || content->is_null())
      throw Error(where + " (" + cm.role + "): \"content\" is missing or null; transformers' template needs it "
                  "(use \"\" for an assistant turn that only calls tools)");
    cm.content = field_string(m, "content", where, true);
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null())
      cm.reasoning_content = field_string(m, "reasoning_content", where, true);
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) throw Error(where + ": \"tool_calls\" must be an array");
      for (size_t t = 0; t < m["tool_calls"].size(); ++t) {
        const ojson* call = &m["tool_calls"][t];
        std::string cw = where + " tool_call " + std::to_string(t);
        if (!call->is_object()) throw Error(cw + " is not an object");
        if (call->contains("function") && (*call)["function"].is_object()) call = &(*call)["function"];
        ToolCall tc;
        tc.name = field_string(*call, "name", cw, true);
        auto a = call->find("arguments");
        if (a == call->end()) throw Error(cw + ": missing \"arguments\"");
        if (a->is_string()) {
          tc.arguments = a->get<std::string>();
        } else {
          append_python_json(*a, tc.arguments);
        }
        cm.tool_calls.push_back(std::move(tc));
      }
    }
    conv.messages.push_back(std::move(cm));
  }
  return conv;
}

}  // namespace qt::tok
