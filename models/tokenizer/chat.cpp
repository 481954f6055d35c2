// Qwen3's chat_template written out by hand. Each branch mirrors one construct of the Jinja template in
// tokenizer_config.json; the Python string methods it calls (split, strip('\n'), startswith) are
// reproduced exactly because they decide where reasoning starts and ends.
#include "models/tokenizer/chat.h"

#include <cmath>
#include <cstdio>
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
    case ojson::value_t::number_float: {
      double d = v.get<double>();
      if (std::isnan(d)) { out += "NaN"; break; }
      if (std::isinf(d)) { out += d > 0 ? "Infinity" : "-Infinity"; break; }
      out += v.dump();  // shortest round-trip digits, same exponent style as Python's repr
      break;
    }
    default: out += v.dump(); break;
  }
}

ojson parse_ordered(std::string_view text, const char* what) {
  try {
    return ojson::parse(text);
  } catch (const ojson::exception& e) {
    throw Error(std::string(what) + " is not valid JSON: " + e.what());
  }
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
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    std::string where = "conversation: message " + std::to_string(i);
    if (!m.is_object()) throw Error(where + " is not an object");
    ChatMessage cm;
    cm.role = field_string(m, "role", where, true);
    cm.content = field_string(m, "content", where, cm.role != "assistant" || !m.contains("tool_calls"));
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
