#include "runtime/model/qwen3_model.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace qt::rt {
namespace {

constexpr int64_t kLogitRowsPerPass = 16;  // bounds the logits buffer for --logits-out on long prompts

uint64_t tensor_bytes(const QTensor& t) { return t.empty() ? 0 : t.storage_bytes(); }

}  // namespace

Qwen3Model::Qwen3Model(const ModelWeights& weights, Backend& backend, int64_t context, int64_t max_batch)
    : w_(weights), be_(backend), context_(context > 0 ? context : weights.config.max_seq_len),
      max_batch_(std::max<int64_t>(1, max_batch)) {
  const ModelConfig& c = w_.config;
  if (context_ <= 0) throw Error("context length must be positive");
  if (c.max_seq_len > 0 && context_ > c.max_seq_len)
    throw Error("context length " + std::to_string(context_) + " exceeds the model's max_position_embeddings " +
                std::to_string(c.max_seq_len));
  const size_t B = size_t(max_batch_), dim = size_t(c.dim), qd = size_t(c.q_dim()), kvd = size_t(c.kv_dim());
  const size_t cache = size_t(c.n_layers) * size_t(context_) * kvd;
  k_cache_ = be_.alloc(cache);
  v_cache_ = be_.alloc(cache);
  x_ = be_.alloc(B * dim);
  xn_ = be_.alloc(B * dim);
  q_ = be_.alloc(B * qd);
  k_ = be_.alloc(B * kvd);
  v_ = be_.alloc(B * kvd);
  att_ = be_.alloc(B * qd);
  o_ = be_.alloc(B * dim);
  // Dense layers of a MoE model (mlp_only_layers) may be wider than an expert.
  int64_t hidden = c.hidden_dim;
  for (const LayerWeights& l : w_.layers) hidden = std::max(hidden, l.w1.rows);
  h1_ = be_.alloc(B * size_t(hidden));
  h3_ = be_.alloc(B * size_t(hidden));
  logits_ = be_.alloc(size_t(std::min(max_batch_, kLogitRowsPerPass)) * size_t(c.vocab_size));
  if (c.is_moe()) {
    router_ = be_.alloc(B * size_t(c.num_experts));
    ex_in_ = be_.alloc(B * dim);
    ex_out_ = be_.alloc(B * dim);
  }
  be_.prepare(w_);
}

Qwen3Model::~Qwen3Model() = default;

void Qwen3Model::truncate(int64_t pos) {
  if (pos < 0 || pos > pos_) throw Error("cannot truncate the KV cache to " + std::to_string(pos));
  pos_ = pos;
}

std::vector<float> Qwen3Model::forward(const int32_t* tokens, int64_t n, LogitsRows rows) {
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
    run_chunk(tokens + start, m, want, out);
  }
  return logits;
}

void Qwen3Model::run_chunk(const int32_t* tokens, int64_t m, LogitsRows rows, float* logits_out) {
  const ModelConfig& c = w_.config;
  be_.embed(w_.embedding, tokens, m, x_->data());
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    attention_block(l, m);
    be_.rmsnorm(x_->data(), lw.ffn_norm.data(), m, c.dim, c.rms_norm_eps, xn_->data());
    if (c.is_moe() && !lw.expert_w1.empty()) {
      moe_mlp(lw, m);
    } else {
      dense_mlp(lw, m);
    }
  }
  pos_ += m;
  if (rows == LogitsRows::kNone) return;
  const QTensor& head = w_.classifier.empty() ? w_.embedding : w_.classifier;
  const int64_t first = rows == LogitsRows::kLast ? m - 1 : 0;
  const int64_t count = m - first;
  be_.rmsnorm(x_->data() + first * c.dim, w_.final_norm.data(), count, c.dim, c.rms_norm_eps, xn_->data());
  for (int64_t r = 0; r < count; r += kLogitRowsPerPass) {
    const int64_t k = std::min(kLogitRowsPerPass, count - r);
    be_.matmul(head, xn_->data() + r * c.dim, k, logits_->data());
    be_.download(logits_->data(), size_t(k * c.vocab_size), logits_out + r * c.vocab_size);
  }
}

void Qwen3Model::attention_block(int64_t layer, int64_t m) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const int64_t kvd = c.kv_dim();
  be_.rmsnorm(x_->data(), lw.attn_norm.data(), m, c.dim, c.rms_norm_eps, xn_->data());
  const MatmulJob qkv[3] = {{&lw.wq, q_->data()}, {&lw.wk, k_->data()}, {&lw.wv, v_->data()}};
  be_.matmul_group(qkv, 3, xn_->data(), m);
  be_.rmsnorm(q_->data(), lw.q_norm.data(), m * c.n_heads, c.head_dim, c.rms_norm_eps, q_->data());
  be_.rmsnorm(k_->data(), lw.k_norm.data(), m * c.n_kv_heads, c.head_dim, c.rms_norm_eps, k_->data());
  be_.rope(q_->data(), m, c.n_heads, c.head_dim, pos_, c.rope_theta);
  be_.rope(k_->data(), m, c.n_kv_heads, c.head_dim, pos_, c.rope_theta);
  float* kl = k_cache_->data() + layer * context_ * kvd;
  float* vl = v_cache_->data() + layer * context_ * kvd;
  be_.copy(k_->data(), size_t(m * kvd), kl + pos_ * kvd);
  be_.copy(v_->data(), size_t(m * kvd), vl + pos_ * kvd);
  be_.attention(q_->data(), kl, vl, pos_, m, c.n_heads, c.n_kv_heads, c.head_dim, att_->data());
  be_.matmul(lw.wo, att_->data(), m, o_->data());
  be_.add(x_->data(), o_->data(), m * c.dim);
}

void Qwen3Model::dense_mlp(const LayerWeights& lw, int64_t m) {
  const ModelConfig& c = w_.config;
  const MatmulJob gate_up[2] = {{&lw.w1, h1_->data()}, {&lw.w3, h3_->data()}};
  be_.matmul_group(gate_up, 2, xn_->data(), m);
  be_.silu_mul(h1_->data(), h3_->data(), m * lw.w1.rows);
  be_.matmul(lw.w2, h1_->data(), m, o_->data());
  be_.add(x_->data(), o_->data(), m * c.dim);
}

// Tokens are grouped by expert so each selected expert runs one matmul over all its tokens; experts are
// visited in ascending index, the order in which transformers accumulates them.
void Qwen3Model::moe_mlp(const LayerWeights& lw, int64_t m) {
  const ModelConfig& c = w_.config;
  const int64_t E = c.num_experts, k = c.num_experts_per_tok;
  be_.matmul(lw.router, xn_->data(), m, router_->data(), MatmulMode::kExact);
  std::vector<int32_t> experts(size_t(m * k));
  std::vector<float> weights(size_t(m * k));
  be_.route(router_->data(), m, E, k, c.norm_topk_prob, experts.data(), weights.data());

  std::vector<int32_t> count(size_t(E) + 1, 0);
  for (int32_t e : experts) ++count[size_t(e) + 1];
  for (int64_t e = 0; e < E; ++e) count[size_t(e) + 1] += count[size_t(e)];
  std::vector<int32_t> rows(size_t(m * k));
  std::vector<float> scale(size_t(m * k));
  std::vector<int32_t> fill(count.begin(), count.end() - 1);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = experts[size_t(i * k + j)];
      rows[size_t(fill[size_t(e)])] = int32_t(i);
      scale[size_t(fill[size_t(e)]++)] = weights[size_t(i * k + j)];
    }
  }

  const std::vector<float> zeros(size_t(m * c.dim), 0.0f);
  be_.upload(zeros.data(), zeros.size(), o_->data());
  for (int64_t e = 0; e < E; ++e) {
    const int32_t begin = count[size_t(e)], n = count[size_t(e) + 1] - begin;
    if (n == 0) continue;
    be_.gather_rows(xn_->data(), c.dim, rows.data() + begin, n, ex_in_->data());
    const MatmulJob gate_up[2] = {{&lw.expert_w1[size_t(e)], h1_->data()}, {&lw.expert_w3[size_t(e)], h3_->data()}};
    be_.matmul_group(gate_up, 2, ex_in_->data(), n);
    be_.silu_mul(h1_->data(), h3_->data(), int64_t(n) * c.hidden_dim);
    be_.matmul(lw.expert_w2[size_t(e)], h1_->data(), n, ex_out_->data());
    be_.scatter_add_rows(ex_out_->data(), c.dim, rows.data() + begin, scale.data() + begin, n, o_->data());
  }
  be_.add(x_->data(), o_->data(), m * c.dim);
}

uint64_t Qwen3Model::decode_weight_bytes() const {
  const ModelConfig& c = w_.config;
  uint64_t bytes = tensor_bytes(w_.classifier.empty() ? w_.embedding : w_.classifier);
  bytes += tensor_bytes(w_.embedding) / uint64_t(std::max<int64_t>(1, w_.embedding.rows));
  for (const LayerWeights& l : w_.layers) {
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3, &l.router}) bytes += tensor_bytes(*t);
    if (c.is_moe() && !l.expert_w1.empty()) {
      bytes += uint64_t(c.num_experts_per_tok) *
               (tensor_bytes(l.expert_w1[0]) + tensor_bytes(l.expert_w2[0]) + tensor_bytes(l.expert_w3[0]));
    }
  }
  return bytes;
}

}  // namespace qt::rt
