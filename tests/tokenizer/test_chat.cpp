// Chat rendering parity with transformers' apply_chat_template (Qwen3 template) on the committed cases.
#include <catch2/catch.hpp>

#include <algorithm>

#include "common/error.h"
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

TEST_CASE("numbers in tool calls and tools render as transformers renders them (Python repr, exact big integers)",
          "[tokenizer]") {
  auto golden = nlohmann::json::parse(read_file(data_path("chat_number_cases.json")));
  REQUIRE(golden["renders"].size() >= 40);
  size_t numbers = 0;
  for (const auto& c : golden["renders"]) {
    INFO("case " << c["name"].get<std::string>());
    Conversation parsed = parse_conversation_json(c["conversation"].get<std::string>());
    ChatOptions opt;
    opt.tools = parsed.tools;
    std::string rendered = render_chat(parsed.messages, opt);
    const std::string expected = c["rendered"].get<std::string>();
    if (rendered != expected) {
      size_t at = 0;
      while (at < rendered.size() && at < expected.size() && rendered[at] == expected[at]) ++at;
      FAIL("first difference at byte " << at << ": ours '" << rendered.substr(at > 30 ? at - 30 : 0, 60)
                                       << "' transformers '" << expected.substr(at > 30 ? at - 30 : 0, 60) << "'");
    }
    numbers += static_cast<size_t>(std::count(expected.begin(), expected.end(), ','));
  }
  CHECK(numbers > 8000);
}

TEST_CASE("Python's float repr switches to exponents at 1e16 and below 1e-4 and keeps '.0' on integral values",
          "[tokenizer]") {
  REQUIRE(to_template_json("1e15") == "1000000000000000.0");
  REQUIRE(to_template_json("1e16") == "1e+16");
  REQUIRE(to_template_json("0.0001") == "0.0001");
  REQUIRE(to_template_json("0.00001") == "1e-05");
  REQUIRE(to_template_json("-0.0") == "-0.0");
  REQUIRE(to_template_json("-0") == "0");
  REQUIRE(to_template_json("123456789012345678901234567890") == "123456789012345678901234567890");
  REQUIRE(to_template_json("[1e400, NaN, -Infinity]") == "[Infinity, NaN, -Infinity]");
}

TEST_CASE("conversations transformers refuses are refused with one line naming the message", "[tokenizer]") {
  auto golden = nlohmann::json::parse(read_file(data_path("chat_number_cases.json")));
  REQUIRE(golden["refused"].size() >= 4);
  for (const auto& c : golden["refused"]) {
    INFO("case " << c["name"].get<std::string>() << " (transformers: " << c["hf_error"].get<std::string>() << ")");
    std::string what;
    try {
      Conversation parsed = parse_conversation_json(c["conversation"].get<std::string>());
      render_chat(parsed.messages);
    } catch (const qt::Error& e) {
      what = e.what();
    }
    REQUIRE(!what.empty());
    REQUIRE(what.find('\n') == std::string::npos);
    if (c["message_index"].is_null()) {
      REQUIRE_THAT(what, Catch::Contains("no messages"));
    } else {
      REQUIRE_THAT(what, Catch::Contains("message " + std::to_string(c["message_index"].get<int>())));
    }
  }
  REQUIRE_THROWS_AS(render_chat(std::vector<ChatMessage>{}), qt::Error);
}

TEST_CASE("a conversation holding a NUL byte outside strings is an error, not a hang", "[tokenizer]") {
  // Found by qtune_fuzz_chat_json: the number scan did not advance past a 0x00 byte.
  REQUIRE_THROWS_AS(parse_conversation_json(std::string("[1, \0 2]", 8)), qt::Error);
  REQUIRE_THROWS_AS(to_template_json(std::string("\0", 1)), qt::Error);
}
