#pragma once
// One generation turn: prefill a token sequence, then sample and decode until an end token, the token
// budget or the context is reached. Reports timings for qrun's statistics line.
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/model/qwen3_model.h"
#include "runtime/sampler/sampler.h"

namespace qt::rt {

struct TurnStats {
  int64_t prompt_tokens = 0, generated = 0;
  double prefill_s = 0, first_token_s = 0, decode_s = 0;  // decode_s: after the first token
  bool hit_end = false, hit_context = false;
};

struct TurnResult {
  std::vector<int32_t> tokens;  // generated, including the end token if one was produced
  TurnStats stats;
};

// Feeds `prompt` (appended to the model's cache), then generates up to `max_new` tokens, calling
// `on_token` for each (the end token too). `history` is the repetition-penalty window; generated tokens are
// appended to it. A sampled end token is not fed back into the cache (the caller decides what follows).
// `on_decode_step`, if set, hears each decode step's host seconds (the step run and its token or logits back).
TurnResult generate_turn(Qwen3Model& model, Sampler& sampler, const std::vector<int32_t>& prompt, int64_t max_new,
                         const std::vector<int32_t>& end_tokens, std::vector<int32_t>& history,
                         const std::function<void(int32_t)>& on_token,
                         const std::function<void(double)>& on_decode_step = {});

}  // namespace qt::rt
