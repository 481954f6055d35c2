// qtok: the tokenizer on the command line.
//   qtok encode [--tokenizer PATH]          UTF-8 text on stdin -> JSON array of ids
//   qtok decode [--tokenizer PATH]          JSON array of ids on stdin -> text
//   qtok chat   [--tokenizer PATH]          conversation JSON on stdin -> the rendered prompt (or its ids)
//   qtok export --out X.tokenizer           qwen3.c tokenizer file
//   qtok info                               vocabulary size and special ids
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/paths.h"
#include "models/tokenizer/chat.h"
#include "models/tokenizer/qwen3c.h"
#include "models/tokenizer/tokenizer.h"

namespace {

using qt::CliArgs;
using qt::Error;
namespace tok = qt::tok;

std::string read_stdin() {
  std::string data((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) throw Error("cannot read standard input", qt::kExitFailure);
  return data;
}

void write_stdout(const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() || std::fflush(stdout) != 0)
    throw Error("cannot write standard output", qt::kExitFailure);
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]\n";
}

void add_tokenizer_option(CliArgs& args) {
  args.option("-t,--tokenizer", "PATH", "tokenizer.json or a directory holding it (tokenizer_config.json beside it)",
              qt::default_hf_tokenizer_path());
}

int cmd_encode(int argc, char** argv) {
  CliArgs args("qtok encode", "Reads UTF-8 text on stdin and prints its token ids as a JSON array.");
  add_tokenizer_option(args);
  args.flag("--replace-invalid", "replace invalid UTF-8 with U+FFFD (as Python's errors=\"replace\") instead of failing");
  args.flag("--no-added-tokens", "treat special tokens (<|im_start|> etc.) as plain text; <think> and other non-special added tokens still match (HF split_special_tokens=True)");
  if (!args.parse(argc, argv, 2)) return 0;
  tok::Tokenizer t = tok::Tokenizer::load(args.get("--tokenizer"));
  tok::EncodeOptions opt;
  opt.invalid_utf8 = args.get_flag("--replace-invalid") ? tok::InvalidUtf8::kReplace : tok::InvalidUtf8::kError;
  opt.parse_added_tokens = !args.get_flag("--no-added-tokens");
  std::string text = read_stdin();
  std::vector<int32_t> ids;
  try {
    ids = t.encode(text, opt);
  } catch (const Error& e) {
    throw Error(std::string("stdin: ") + e.what() + " (use --replace-invalid to substitute U+FFFD)", e.exit_code());
  }
  write_stdout(ids_json(ids));
  return 0;
}

int cmd_decode(int argc, char** argv) {
  CliArgs args("qtok decode", "Reads a JSON array of token ids on stdin and prints the decoded text.");
  add_tokenizer_option(args);
  args.flag("--skip-special", "drop special tokens (<|im_start|>, <|endoftext|>, ...)");
  if (!args.parse(argc, argv, 2)) return 0;
  tok::Tokenizer t = tok::Tokenizer::load(args.get("--tokenizer"));
  nlohmann::json j;
  try {
    // A flat array: anything nested is refused as the parser descends, before it is built.
    const nlohmann::json::parser_callback_t flat = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > 1) throw Error("stdin: expected a JSON array of token ids, found nested arrays or objects");
      return true;
    };
    j = nlohmann::json::parse(read_stdin(), flat);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("stdin: not valid JSON: ") + e.what());
  }
  if (!j.is_array()) throw Error("stdin: expected a JSON array of token ids");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX)
      throw Error("stdin: element " + std::to_string(i) + " (" + j[i].dump() + ") is not a token id");
    auto id = static_cast<int32_t>(j[i].get<int64_t>());
    // The library skips unknown ids as HF's decode does (a model may sample its unused rows); asked to decode
    // ids by hand, an id with no token is a mistake worth naming.
    if (!t.id_to_token(id))
      throw Error("stdin: element " + std::to_string(i) + " (" + std::to_string(id) +
                  ") is not in the tokenizer's vocabulary (ids 0.." + std::to_string(t.vocab_size() - 1) + ")");
    ids.push_back(id);
  }
  write_stdout(t.decode(ids, args.get_flag("--skip-special")));
  return 0;
}

int cmd_chat(int argc, char** argv) {
  CliArgs args("qtok chat",
               "Reads a conversation on stdin ({\"messages\": [...], \"tools\": [...]} or a bare message array) and prints "
               "the prompt Qwen3's chat template renders.");
  add_tokenizer_option(args);
  args.flag("--no-think", "enable_thinking=false: append the empty <think></think> block after the generation prompt");
  args.flag("-g,--add-generation-prompt", "end with <|im_start|>assistant\\n (as for generation)");
  args.flag("--ids", "print the token ids of the rendered prompt instead of the text");
  if (!args.parse(argc, argv, 2)) return 0;
  tok::Conversation conv = tok::parse_conversation_json(read_stdin());
  tok::ChatOptions opt;
  opt.add_generation_prompt = args.get_flag("--add-generation-prompt");
  opt.enable_thinking = !args.get_flag("--no-think");
  opt.tools = conv.tools;
  std::string text = tok::render_chat(conv.messages, opt);
  if (args.get_flag("--ids")) {
    tok::Tokenizer t = tok::Tokenizer::load(args.get("--tokenizer"));
    write_stdout(ids_json(t.encode(text)));
  } else {
    write_stdout(text);
  }
  return 0;
}

int cmd_export(int argc, char** argv) {
  CliArgs args("qtok export", "Writes the qwen3.c tokenizer file (<model>.bin.tokenizer) for a HF tokenizer.");
  add_tokenizer_option(args);
  args.option("-o,--out", "FILE", "output path");
  args.option("--bos", "ID", "bos_token_id for the header (default: <|endoftext|>, as Qwen3's config.json)")
      .range(qt::flag_ranges::kTokenId);
  args.option("--eos", "ID", "eos_token_id for the header (default: <|im_end|>, as Qwen3's config.json)")
      .range(qt::flag_ranges::kTokenId);
  if (!args.parse(argc, argv, 2)) return 0;
  if (!args.given("--out")) throw Error("qtok export: --out is required");
  {
    // The tokenizer may be given as its folder: both files it reads there count.
    const std::string t = args.get("--tokenizer");
    if (const std::string why = qt::overwrites_input(args.get("--out"), {t, t + "/tokenizer.json", t + "/tokenizer_config.json"});
        !why.empty())
      throw Error("--out " + why);
  }
  tok::Tokenizer t = tok::Tokenizer::load(args.get("--tokenizer"));
  int64_t bos = args.given("--bos") ? args.get_int("--bos") : -1;
  int64_t eos = args.given("--eos") ? args.get_int("--eos") : -1;
  if (bos >= t.vocab_size()) throw Error("--bos " + std::to_string(bos) + " is not a token id of this tokenizer");
  if (eos >= t.vocab_size()) throw Error("--eos " + std::to_string(eos) + " is not a token id of this tokenizer");
  tok::write_qwen3c_tokenizer(t, args.get("--out"), bos, eos);
  std::fprintf(stderr, "qtok: wrote %s (%d tokens)\n", args.get("--out").c_str(), t.vocab_size());
  return 0;
}

int cmd_info(int argc, char** argv) {
  CliArgs args("qtok info", "Prints the tokenizer's vocabulary size and special token ids as JSON.");
  add_tokenizer_option(args);
  if (!args.parse(argc, argv, 2)) return 0;
  tok::Tokenizer t = tok::Tokenizer::load(args.get("--tokenizer"));
  nlohmann::ordered_json j;
  j["source"] = t.source();
  j["vocab_size"] = t.vocab_size();
  j["merges"] = t.merges().size();
  j["added_tokens"] = t.added_tokens().size();
  j["bos"] = t.bos_id();
  j["eos"] = t.eos_id();
  j["pad"] = t.pad_id();
  j["im_start"] = t.im_start_id();
  j["im_end"] = t.im_end_id();
  j["think"] = t.think_id();
  j["end_think"] = t.end_think_id();
  j["chat_template_is_qwen3"] = t.chat_template_is_qwen3();
  write_stdout(j.dump(1) + "\n");
  return 0;
}

const char* kUsage =
    "usage: qtok <command> [options]\n"
    "  encode   UTF-8 text on stdin -> JSON array of token ids\n"
    "  decode   JSON array of ids on stdin -> text\n"
    "  chat     conversation JSON on stdin -> prompt rendered with Qwen3's chat template\n"
    "  export   write the qwen3.c .tokenizer file\n"
    "  info     vocabulary size and special ids\n"
    "Each command takes --help. The default tokenizer is qtune's Qwen3 tokenizer.json.\n";

}  // namespace

int main(int argc, char** argv) {
  return qt::run_tool("qtok", [&]() -> int {
    if (argc < 2) {
      std::fputs(kUsage, stderr);
      return qt::kExitBadInput;
    }
    std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cmd == "encode") return cmd_encode(argc, argv);
    if (cmd == "decode") return cmd_decode(argc, argv);
    if (cmd == "chat") return cmd_chat(argc, argv);
    if (cmd == "export") return cmd_export(argc, argv);
    if (cmd == "info") return cmd_info(argc, argv);
    throw Error("unknown command '" + cmd + "' (encode, decode, chat, export, info)");
  });
}
