#include "runtime/cli/tokenizer_session.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/paths.h"
#include "models/tokenizer/chat.h"
#include "models/tokenizer/utf8.h"

namespace qt::rt {
namespace {

std::string resolve_tokenizer(const std::string& explicit_path, const std::string& model_path) {
  if (!explicit_path.empty()) {
    if (!file_exists(explicit_path) && !file_exists(explicit_path + "/tokenizer.json"))
      throw Error("--tokenizer: " + explicit_path + ": no such file");
    return explicit_path;
  }
  const size_t slash = model_path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : model_path.substr(0, slash);
  if (file_exists(dir + "/tokenizer.json")) return dir + "/tokenizer.json";
  const std::string shipped = default_hf_tokenizer_path();
  if (!file_exists(shipped)) throw Error("no tokenizer.json beside the model and none at " + shipped + "; pass --tokenizer");
  return shipped;
}

}  // namespace

void ChatState::reset() {
  turns = 0;
  history.clear();
  pending.reset();
  pending_is_end = false;
}

void ChatState::after_turn(const std::vector<int32_t>& generated, const std::vector<int32_t>& end_tokens) {
  ++turns;
  if (generated.empty()) return;
  pending = generated.back();
  pending_is_end = std::find(end_tokens.begin(), end_tokens.end(), generated.back()) != end_tokens.end();
}

TokenizerSession::TokenizerSession(const std::string& explicit_path, const std::string& model_path,
                                   int64_t model_vocab)
    : tok_(tok::Tokenizer::load(resolve_tokenizer(explicit_path, model_path))) {
  if (tok_.vocab_size() > model_vocab)
    throw Error(tok_.source() + ": the tokenizer has " + std::to_string(tok_.vocab_size()) +
                " ids but the model's vocabulary is only " + std::to_string(model_vocab));
  for (int32_t id : {tok_.im_end_id(), tok_.eos_id(), tok_.endoftext_id()})
    if (id >= 0 && std::find(end_.begin(), end_.end(), id) == end_.end()) end_.push_back(id);
}

namespace {

// The user's own text is checked, so the error counts its bytes, not the chat template's around it.
void require_utf8(const std::string& text, const char* what) {
  const size_t bad = tok::utf8::first_invalid(text);
  if (bad == text.size()) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
  throw Error(std::string(what) + " is not valid UTF-8: byte " + std::to_string(bad) + " (" + hex + ")");
}

}  // namespace

std::vector<int32_t> TokenizerSession::turn_tokens(const ChatState& chat, const std::string& message) const {
  require_utf8(message, "the message");
  require_utf8(chat.system, "--system");
  std::vector<int32_t> out;
  if (chat.pending) out.push_back(*chat.pending);
  std::string text;
  if (chat.raw) {
    text = message;
  } else if (chat.turns == 0) {
    std::vector<tok::ChatMessage> msgs;
    auto add = [&](const char* role, const std::string& content) {
      tok::ChatMessage m;
      m.role = role;
      m.content = content;
      msgs.push_back(std::move(m));
    };
    if (!chat.system.empty()) add("system", chat.system);
    add("user", message);
    tok::ChatOptions opt;
    opt.add_generation_prompt = true;
    opt.enable_thinking = chat.think;
    text = tok::render_chat(msgs, opt);
  } else {
    if (!chat.pending_is_end) text = "<|im_end|>";
    text += "\n<|im_start|>user\n" + message + "<|im_end|>\n<|im_start|>assistant\n";
    if (!chat.think) text += "<think>\n\n</think>\n\n";
  }
  tok_.encode_into(text, out);
  return out;
}

StreamPrinter::StreamPrinter(const TokenizerSession& session) : decoder_(session.tokenizer(), true) {}

void StreamPrinter::push(int32_t token) {
  const std::string s = decoder_.push(token);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void StreamPrinter::finish() {
  const std::string s = decoder_.flush();
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace qt::rt
