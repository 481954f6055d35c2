// Chat rendering parity with transformers' apply_chat_template (Qwen3 template) on the committed cases.
#include <catch2/catch.hpp>

#include "models/tokenizer/chat.h"
#include "tests/tokenizer/golden_data.h"

using namespace qt::tok;
using namespace qt::tok::test;

TEST_CASE("render_chat reproduces apply_chat_template for every golden conversation", "[tokenizer]") {
  // Ordered: tool JSON keys must keep their order, as Python dicts do.
  auto cases = nlohmann::ordered_json::parse(read_file(data_path("chat_cases.json")));
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO("conversation " << c["name"].get<std::string>());
    nlohmann::ordered_json conv = {{"messages", c["messages"]}, {"tools", c["tools"]}};
    Conversation parsed = parse_conversation_json(conv.dump());
    ChatOptions opt;
    opt.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    opt.enable_thinking = c["enable_thinking"].get<bool>();
    opt.tools = parsed.tools;
    std::string rendered = render_chat(parsed.messages, opt);
    REQUIRE(rendered == c["rendered"].get<std::string>());
    std::vector<int32_t> ids;
    for (const auto& x : c["ids"]) ids.push_back(x.get<int32_t>());
    REQUIRE(qwen3().encode(rendered) == ids);
  }
}

TEST_CASE("thinking off appends the empty think block, thinking on (the default) does not", "[tokenizer]") {
  std::vector<ChatMessage> msgs{{"user", "%s", std::nullopt, {}}};
  ChatOptions opt;
  opt.add_generation_prompt = true;
  opt.enable_thinking = false;
  // formats.md §2: qwen3.c's .template file, 71 bytes.
  REQUIRE(render_chat(msgs, opt) == "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  REQUIRE(render_chat(msgs, opt).size() == 71);
  opt.enable_thinking = true;
  REQUIRE(render_chat(msgs, opt) == "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("tojson prints like Python's json.dumps(ensure_ascii=False)", "[tokenizer]") {
  REQUIRE(to_template_json(R"({"b": [1, 2.5, true, null], "a": "é\n\"x\"\u0001"})") ==
          "{\"b\": [1, 2.5, true, null], \"a\": \"é\\n\\\"x\\\"\\u0001\"}");
  REQUIRE(to_template_json("1e-05") == "1e-05");
  REQUIRE(to_template_json("{}") == "{}");
}

TEST_CASE("malformed conversations are rejected with a message naming the message", "[tokenizer]") {
  REQUIRE_THROWS_WITH(parse_conversation_json("[{\"content\": \"x\"}]"), Catch::Contains("message 0") && Catch::Contains("role"));
  REQUIRE_THROWS_WITH(parse_conversation_json("{\"messages\": 3}"), Catch::Contains("array"));
  REQUIRE_THROWS_WITH(parse_conversation_json("[{\"role\": \"user\", \"content\": 5}]"), Catch::Contains("content"));
  REQUIRE_THROWS_WITH(parse_conversation_json("not json"), Catch::Contains("not valid JSON"));
}
