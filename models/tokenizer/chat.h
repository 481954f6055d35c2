#pragma once
// Qwen3 chat formatting, character-for-character what transformers' tokenizer.apply_chat_template(messages,
// tokenize=False, add_generation_prompt=..., enable_thinking=..., tools=...) renders with the chat_template of
// Qwen3's tokenizer_config.json: optional system message, multi-turn history, tool calls and tool responses,
// the rule that drops the reasoning of assistant turns before the last user query, and enable_thinking=false
// appending the empty "<think>\n\n</think>\n\n" block after the generation prompt.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qt::tok {

struct ToolCall {
  std::string name;
  // Emitted verbatim after "arguments": . The template prints a string argument as is and any other JSON
  // value through `tojson`; parse_conversation_json does that conversion (see to_template_json).
  std::string arguments;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  // Assistant reasoning given separately (HF's message["reasoning_content"]); when absent the template
  // extracts it from "<think>...</think>" inside content.
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;  // assistant only
};

struct ChatOptions {
  bool add_generation_prompt = false;  // HF's default; generation wants true
  bool enable_thinking = true;         // HF's template treats "undefined" as thinking on
  // Tool signatures, each already serialized as the template's `tojson` filter prints it.
  std::vector<std::string> tools;
};

std::string render_chat(std::span<const ChatMessage> messages, const ChatOptions& options = {});

struct Conversation {
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools;  // serialized like ChatOptions::tools
};

// Parses {"messages": [...], "tools": [...]} or a bare [...] of messages in the OpenAI/HF shape:
// {"role", "content", "reasoning_content"?, "tool_calls"?: [{"function"?: {"name", "arguments"}}]}.
// Throws qt::Error naming the offending message index/field.
Conversation parse_conversation_json(std::string_view json_text);

// transformers' tojson filter: json.dumps(value, ensure_ascii=False) with ", " / ": " separators and the
// keys in their original order. `json_text` is any JSON value; throws qt::Error if it does not parse.
std::string to_template_json(std::string_view json_text);

}  // namespace qt::tok
