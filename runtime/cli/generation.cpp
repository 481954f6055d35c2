#include "runtime/cli/generation.h"

#include <algorithm>
#include <chrono>

namespace qt::rt {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TurnResult generate_turn(Qwen3Model& model, Sampler& sampler, const std::vector<int32_t>& prompt, int64_t max_new,
                         const std::vector<int32_t>& end_tokens, std::vector<int32_t>& history,
                         const std::function<void(int32_t)>& on_token,
                         const std::function<void(double)>& on_decode_step) {
  TurnResult r;
  r.stats.prompt_tokens = int64_t(prompt.size());
  const auto t0 = std::chrono::steady_clock::now();
  // Greedy decoding asks the model for the next token itself, so a device backend returns one int per step.
  const bool greedy = sampler.greedy();
  std::vector<float> logits;
  int32_t next = -1;
  if (max_new <= 0) {
    model.forward(prompt, LogitsRows::kNone);
  } else if (greedy) {
    next = model.forward_greedy(prompt.data(), int64_t(prompt.size()));
  } else {
    logits = model.forward(prompt, LogitsRows::kLast);
  }
  r.stats.prefill_s = seconds_since(t0);
  history.insert(history.end(), prompt.begin(), prompt.end());
  if (max_new <= 0) return r;
  const int64_t vocab = model.config().vocab_size;
  std::chrono::steady_clock::time_point t_first;
  for (int64_t i = 0; i < max_new; ++i) {
    const int32_t tok = greedy ? next : sampler.sample(logits.data(), vocab, history);
    if (i == 0) {
      r.stats.first_token_s = seconds_since(t0);
      t_first = std::chrono::steady_clock::now();
    }
    r.tokens.push_back(tok);
    history.push_back(tok);
    ++r.stats.generated;
    on_token(tok);
    if (std::find(end_tokens.begin(), end_tokens.end(), tok) != end_tokens.end()) {
      r.stats.hit_end = true;
      break;
    }
    if (i + 1 == max_new) break;
    if (model.position() + 1 > model.context()) {
      r.stats.hit_context = true;
      break;
    }
    const auto t_step = std::chrono::steady_clock::now();
    if (greedy) {
      next = model.forward_greedy(&tok, 1);
    } else {
      logits = model.forward(&tok, 1, LogitsRows::kLast);
    }
    if (on_decode_step) on_decode_step(seconds_since(t_step));
  }
  r.stats.decode_s = seconds_since(t_first);
  return r;
}

}  // namespace qt::rt
