#pragma once
// The Qwen3 / Qwen3-MoE forward pass (transformers modeling_qwen3 / modeling_qwen3_moe), written once
// against the Backend op interface. Holds the KV cache of one sequence: each forward() call appends its
// tokens after those already cached, so a prompt can be prefilled as one matrix and then decoded token
// by token, and a chat keeps its history across turns.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/core/weights.h"
#include "runtime/core/backend.h"

namespace qt::rt {

enum class LogitsRows { kLast, kAll, kNone };

class Qwen3Model {
 public:
  // `context`: the most tokens the KV cache may hold (0 = the model's max_seq_len). The cache is allocated for
  // the tokens actually run and grows (doubling, up to `context`) as they come, so a large context costs
  // nothing up front. `max_batch`: tokens per prefill chunk (longer inputs are processed in chunks); 0: the
  // backend's Backend::prefill_chunk().
  Qwen3Model(const ModelWeights& weights, Backend& backend, int64_t context, int64_t max_batch = 0);
  ~Qwen3Model();

  const ModelConfig& config() const { return w_.config; }
  int64_t context() const { return context_; }
  int64_t position() const { return pos_; }  // tokens in the KV cache
  int64_t kv_capacity() const { return capacity_; }  // tokens the KV cache has room for now (<= context())
  void reset() { pos_ = 0; }
  // Drops cached tokens after `pos` (pos <= position()).
  void truncate(int64_t pos);

  // Runs `tokens` at positions position()..position()+n-1 and appends them to the cache. Returns the logits
  // of the last token ([vocab]), of every token ([n][vocab]) or nothing. Throws qt::Error if the cache
  // cannot hold them or a token id is outside the vocabulary.
  std::vector<float> forward(const int32_t* tokens, int64_t n, LogitsRows rows = LogitsRows::kLast);
  std::vector<float> forward(const std::vector<int32_t>& tokens, LogitsRows rows = LogitsRows::kLast) {
    return forward(tokens.data(), int64_t(tokens.size()), rows);
  }

  // Runs `tokens` like forward() and returns the most likely next token after the last one (greedy
  // decoding); on a device backend only that token comes back to the host.
  int32_t forward_greedy(const int32_t* tokens, int64_t n);

  // decode_weight_bytes() of its weights, below.
  uint64_t decode_weight_bytes() const;

 private:
  void check_input(const int32_t* tokens, int64_t n) const;
  void reserve(int64_t tokens);
  void run_chunk(const int32_t* tokens, int64_t m, LogitsRows rows, float* logits_out, int32_t* argmax_out);
  void attention_block(int64_t layer, int64_t m, Act& pending, bool fused, const float* then_norm = nullptr);
  void dense_mlp(const LayerWeights& l, int64_t m);
  MoeBlock moe_block(const LayerWeights& l) const;

  const ModelWeights& w_;
  Backend& be_;
  int64_t context_, max_batch_, pos_ = 0, capacity_ = 0;
  std::vector<std::unique_ptr<DeviceBuffer>> k_cache_, v_cache_;  // per layer: [capacity][kv_dim]
  // Activations for one chunk of up to max_batch_ tokens.
  // qkv_: one step's q [m][q_dim], k [m][kv_dim] and v [m][kv_dim] one after another, so that at one row
  // [q | k | v] is one row, as a backend running the three as one linear over [wq; wk; wv] writes it.
  std::unique_ptr<DeviceBuffer> x_, xn_, qkv_, q_rot_, att_, o_, h1_, h3_, logits_;
};

// Weight bytes one decode step reads (dense weights, the router, top-k experts' worth of expert weights, the
// classifier and one embedding row): the numerator of the memory-bandwidth roofline. Needs no backend.
uint64_t decode_weight_bytes(const ModelWeights& weights);

}  // namespace qt::rt
