#include "runtime/model/qwen3_model.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace qt::rt {
namespace {

constexpr int64_t kInitialCacheTokens = 256;

uint64_t tensor_bytes(const QTensor& t) { return t.empty() ? 0 : t.storage_bytes(); }

}  // namespace

Qwen3Model::Qwen3Model(const ModelWeights& weights, Backend& backend, int64_t context, int64_t max_batch)
    : w_(weights), be_(backend), context_(context > 0 ? context : weights.config.max_seq_len),
      max_batch_(std::max<int64_t>(1, max_batch > 0 ? max_batch : backend.prefill_chunk())) {
  const ModelConfig& c = w_.config;
  if (context_ <= 0) throw Error("context length must be positive");
  if (c.max_seq_len > 0 && context_ > c.max_seq_len)
    throw Error("context length " + std::to_string(context_) + " exceeds the model's max_position_embeddings " +
                std::to_string(c.max_seq_len));
  // The weights first: a device that cannot hold them refuses the model before anything else is allocated.
  be_.prepare(w_);
  const size_t B = size_t(max_batch_), dim = size_t(c.dim), qd = size_t(c.q_dim()), kvd = size_t(c.kv_dim());
  x_ = be_.alloc(B * dim);
  xn_ = be_.alloc(B * dim);
  qkv_ = be_.alloc(B * (qd + 2 * kvd));
  att_ = be_.alloc(B * qd);
  o_ = be_.alloc(B * dim);
  // Dense layers of a MoE model (mlp_only_layers) may be wider than an expert.
  int64_t hidden = c.hidden_dim;
  for (const LayerWeights& l : w_.layers) hidden = std::max(hidden, l.w1.rows);
  h1_ = be_.alloc(B * size_t(hidden));
  h3_ = be_.alloc(B * size_t(hidden));
  logits_ = be_.alloc(size_t(std::min(max_batch_, kLogitRowsPerPass)) * size_t(c.vocab_size));
  q_rot_ = be_.alloc(B * qd);
  reserve(std::min(context_, kInitialCacheTokens));  // after prepare(), which may choose the cache's type
}

Qwen3Model::~Qwen3Model() = default;

// Each layer's keys and values are a buffer of [capacity][kv_dim]. A new capacity moves the cached rows
// through the host as fp32, which every backend's cache type converts to and from exactly, one buffer at a
// time, each old buffer freed as soon as it is copied: growing never holds two caches at once.
void Qwen3Model::reserve(int64_t tokens) {
  if (tokens <= capacity_) return;
  const ModelConfig& c = w_.config;
  const int64_t kvd = c.kv_dim();
  const int64_t cap = std::min(context_, std::max(tokens, 2 * capacity_));
  std::vector<float> rows(size_t(pos_ * kvd));
  k_cache_.resize(size_t(c.n_layers));
  v_cache_.resize(size_t(c.n_layers));
  for (auto* caches : {&k_cache_, &v_cache_}) {
    for (auto& buffer : *caches) {
      auto grown = be_.alloc_kv(size_t(cap) * size_t(kvd));
      if (pos_ > 0) {
        be_.download(buffer->view(), rows.size(), rows.data());
        be_.upload(rows.data(), rows.size(), grown->view());
      }
      buffer = std::move(grown);
    }
  }
  capacity_ = cap;
}

void Qwen3Model::truncate(int64_t pos) {
  if (pos < 0 || pos > pos_) throw Error("cannot truncate the KV cache to " + std::to_string(pos));
  pos_ = pos;
}

void Qwen3Model::check_input(const int32_t* tokens, int64_t n) const {
  const int64_t vocab = w_.config.vocab_size;
  if (n <= 0) throw Error("forward: no tokens to run");
  if (pos_ + n > context_)
    throw Error("the input (" + std::to_string(n) + " tokens after " + std::to_string(pos_) +
                " cached) does not fit the context of " + std::to_string(context_) + " tokens");
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
  }
}

std::vector<float> Qwen3Model::forward(const int32_t* tokens, int64_t n, LogitsRows rows) {
  const int64_t vocab = w_.config.vocab_size;
  check_input(tokens, n);
  reserve(pos_ + n);
  std::vector<float> logits;
  if (rows == LogitsRows::kAll) logits.resize(size_t(n * vocab));
  if (rows == LogitsRows::kLast) logits.resize(size_t(vocab));
  for (int64_t start = 0; start < n; start += max_batch_) {
    const int64_t m = std::min(max_batch_, n - start);
    const bool last_chunk = start + m == n;
    LogitsRows want = rows == LogitsRows::kAll ? LogitsRows::kAll
                      : (rows == LogitsRows::kLast && last_chunk) ? LogitsRows::kLast
                                                                  : LogitsRows::kNone;
    float* out = rows == LogitsRows::kAll ? logits.data() + start * vocab : logits.data();
    be_.begin_step(tokens + start, m, pos_);
    run_chunk(tokens + start, m, want, out, nullptr);
    be_.end_step();
  }
  return logits;
}

int32_t Qwen3Model::forward_greedy(const int32_t* tokens, int64_t n) {
  check_input(tokens, n);
  reserve(pos_ + n);
  int32_t next = -1;
  for (int64_t start = 0; start < n; start += max_batch_) {
    const int64_t m = std::min(max_batch_, n - start);
    const bool last_chunk = start + m == n;
    be_.begin_step(tokens + start, m, pos_);
    run_chunk(tokens + start, m, last_chunk ? LogitsRows::kLast : LogitsRows::kNone, nullptr,
              last_chunk ? &next : nullptr);
    be_.end_step();
  }
  // The argmax of a row of NaN (Backend::argmax).
  if (next < 0)
    throw Error("the model's logits are all NaN: its weights overflow or are corrupt, so there is no next token",
                kExitBadInput);
  return next;
}

// Each block's output is added to the residual stream x by the norm that follows it, so the add and the
// norm are one op; the first layer's norm has nothing to add, the final norm adds the last block's output.
// Where the backend fuses the norm into the matmuls beside it (Backend::fuses_norm: a device's decode step),
// o_proj and down_proj (or the MoE finalize) add their outputs to x themselves and q|k|v and gate|up normalize x
// as they read it: nothing is pending after such a block.
void Qwen3Model::run_chunk(const int32_t* tokens, int64_t m, LogitsRows rows, float* logits_out, int32_t* argmax_out) {
  const ModelConfig& c = w_.config;
  const Act x = x_->view(), xn = xn_->view(), o = o_->view();
  be_.embed(w_.embedding, tokens, m, x);
  Act pending{};  // the block output not yet added to x
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    const bool moe = c.is_moe() && !lw.expert_w1.empty();
    const bool fused = be_.fuses_norm(lw, m);
    // Fused, the attention block adds its output to x; before a MoE block, whose router and experts both read the
    // normalized rows, it writes those too, and the block's finalize adds its output to x.
    attention_block(l, m, pending, fused, fused && moe ? lw.ffn_norm.data() : nullptr);
    if (fused && moe) {
      be_.moe_residual(moe_block(lw), xn, m, x, o);
      continue;
    }
    if (fused) {
      be_.rmsnorm_gate_up_swiglu(x, lw.ffn_norm.data(), c.rms_norm_eps, lw.w1, lw.w3, m, h1_->view(), h3_->view(), xn);
      be_.matmul_residual(lw.w2, h1_->view(), m, x, o);
      continue;
    }
    be_.add_rmsnorm(x, pending, lw.ffn_norm.data(), m, c.dim, c.rms_norm_eps, xn);
    if (moe) be_.moe(moe_block(lw), xn, m, o);
    else dense_mlp(lw, m);
    pending = o;
  }
  pos_ += m;
  if (rows == LogitsRows::kNone) return;
  const QTensor& head = w_.classifier.empty() ? w_.embedding : w_.classifier;
  const int64_t first = rows == LogitsRows::kLast ? m - 1 : 0;
  const int64_t count = m - first;
  be_.add_rmsnorm(x.at(first * c.dim), pending ? pending.at(first * c.dim) : Act{}, w_.final_norm.data(), count,
                  c.dim, c.rms_norm_eps, xn);
  for (int64_t r = 0; r < count; r += kLogitRowsPerPass) {
    const int64_t k = std::min(kLogitRowsPerPass, count - r);
    be_.matmul(head, xn.at(r * c.dim), k, logits_->view());
    if (argmax_out) be_.argmax(logits_->view(), k, c.vocab_size, argmax_out + r);
    if (logits_out) be_.download(logits_->view(), size_t(k * c.vocab_size), logits_out + r * c.vocab_size);
  }
}

// The attention block's input is RMSNorm(x + pending); its output goes to `pending`, or straight into x where the
// norms are fused, and then, given `then_norm`, x's RMSNorm with those weights into xn.
void Qwen3Model::attention_block(int64_t layer, int64_t m, Act& pending, bool fused, const float* then_norm) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const Act x = x_->view(), xn = xn_->view(), q = qkv_->view(), k = q.at(m * c.q_dim()), v = k.at(m * c.kv_dim());
  const MatmulJob qkv[3] = {{&lw.wq, q}, {&lw.wk, k}, {&lw.wv, v}};
  if (fused && !pending) {
    be_.rmsnorm_matmul_group(x, lw.attn_norm.data(), c.rms_norm_eps, qkv, 3, m, xn);
  } else {
    be_.add_rmsnorm(x, pending, lw.attn_norm.data(), m, c.dim, c.rms_norm_eps, xn);
    be_.matmul_group(qkv, 3, xn, m);
  }
  pending = Act{};
  QkRopeKv s;
  s.q = q, s.k = k, s.v = v;
  s.q_norm = lw.q_norm.data(), s.k_norm = lw.k_norm.data();
  s.m = m, s.n_heads = c.n_heads, s.n_kv_heads = c.n_kv_heads, s.head_dim = c.head_dim;
  s.pos0 = pos_, s.eps = c.rms_norm_eps, s.theta = c.rope_theta;
  s.k_cache = k_cache_[size_t(layer)]->view();
  s.v_cache = v_cache_[size_t(layer)]->view();
  s.capacity = capacity_;
  s.q_out = q_rot_->view();
  be_.rope_attention(s, att_->view());
  if (fused && then_norm) {
    be_.matmul_residual_rmsnorm(lw.wo, att_->view(), m, x, o_->view(), then_norm, c.rms_norm_eps, xn);
  } else if (fused) {
    be_.matmul_residual(lw.wo, att_->view(), m, x, o_->view());
  } else {
    be_.matmul(lw.wo, att_->view(), m, o_->view());
    pending = o_->view();
  }
}

void Qwen3Model::dense_mlp(const LayerWeights& lw, int64_t m) {
  be_.gate_up_swiglu(lw.w1, lw.w3, xn_->view(), m, h1_->view(), h3_->view());
  be_.matmul(lw.w2, h1_->view(), m, o_->view());
}

MoeBlock Qwen3Model::moe_block(const LayerWeights& lw) const {
  const ModelConfig& c = w_.config;
  MoeBlock b;
  b.router = &lw.router;
  b.gate = &lw.expert_w1, b.up = &lw.expert_w3, b.down = &lw.expert_w2;
  b.top_k = c.num_experts_per_tok;
  b.renormalize = c.norm_topk_prob;
  return b;
}

uint64_t Qwen3Model::decode_weight_bytes() const { return rt::decode_weight_bytes(w_); }

uint64_t decode_weight_bytes(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  uint64_t bytes = tensor_bytes(w.classifier.empty() ? w.embedding : w.classifier);
  bytes += tensor_bytes(w.embedding) / uint64_t(std::max<int64_t>(1, w.embedding.rows));
  for (const LayerWeights& l : w.layers) {
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3, &l.router}) bytes += tensor_bytes(*t);
    if (c.is_moe() && !l.expert_w1.empty()) {
      bytes += uint64_t(c.num_experts_per_tok) *
               (tensor_bytes(l.expert_w1.base) + tensor_bytes(l.expert_w2.base) + tensor_bytes(l.expert_w3.base));
    }
  }
  return bytes;
}

}  // namespace qt::rt
