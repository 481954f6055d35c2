#include "models/core/linear_shapes.h"

namespace qt {

bool qkv_concatenable(const QTensor& q, const QTensor& k, const QTensor& v) {
  if (q.empty() || k.empty() || v.empty()) return false;
  for (const QTensor* t : {&k, &v})
    if (t->type != q.type || t->group_size != q.group_size || t->cols != q.cols) return false;
  return true;
}

bool gate_up_concatenable(const QTensor& gate, const QTensor& up) {
  return !gate.empty() && !up.empty() && up.type == gate.type && up.group_size == gate.group_size &&
         up.cols == gate.cols && up.rows == gate.rows;
}

std::vector<LinearShape> model_linear_shapes(const ModelConfig& c, const ModelWeights* w) {
  std::vector<LinearShape> out;
  const int64_t config_group = c.group_size > 0 ? c.group_size : 0;
  auto add = [&](const std::string& label, const QTensor* t, int64_t n, int64_t k, bool expert, int64_t max_rows) {
    if (w && (!t || t->empty())) return;
    LinearShape s;
    s.n = n, s.k = k, s.expert = expert, s.max_rows = max_rows;
    s.group = t ? int64_t(t->group_size) : config_group;
    if (t) s.type = t->type;
    for (LinearShape& o : out)
      if (o.n == s.n && o.k == s.k && o.group == s.group && o.type == s.type && o.expert == s.expert &&
          o.max_rows == s.max_rows) {
        o.label += "+" + label;
        return;
      }
    s.label = label;
    out.push_back(s);
  };
  const LayerWeights* l = w && !w->layers.empty() ? &w->layers[0] : nullptr;
  auto expert = [](const ExpertStack& e) { return e.empty() ? nullptr : &e.base; };
  add("wq", l ? &l->wq : nullptr, c.q_dim(), c.dim, false, 0);
  add("wk", l ? &l->wk : nullptr, c.kv_dim(), c.dim, false, 0);
  add("wv", l ? &l->wv : nullptr, c.kv_dim(), c.dim, false, 0);
  if (!l || qkv_concatenable(l->wq, l->wk, l->wv))
    add("wq|wk|wv", l ? &l->wq : nullptr, c.q_dim() + 2 * c.kv_dim(), c.dim, false, kConcatenatedQkvMaxRows);
  add("wo", l ? &l->wo : nullptr, c.dim, c.q_dim(), false, 0);
  if (c.is_moe()) {
    add("router", l ? &l->router : nullptr, c.num_experts, c.dim, false, 0);
    add("expert.w1", l ? expert(l->expert_w1) : nullptr, c.hidden_dim, c.dim, true, 0);
    add("expert.w3", l ? expert(l->expert_w3) : nullptr, c.hidden_dim, c.dim, true, 0);
    add("expert.w2", l ? expert(l->expert_w2) : nullptr, c.dim, c.hidden_dim, true, 0);
  } else {
    add("w1", l ? &l->w1 : nullptr, c.hidden_dim, c.dim, false, 0);
    add("w3", l ? &l->w3 : nullptr, c.hidden_dim, c.dim, false, 0);
    add("w2", l ? &l->w2 : nullptr, c.dim, c.hidden_dim, false, 0);
  }
  add("lm_head", w ? (w->classifier.empty() ? &w->embedding : &w->classifier) : nullptr, c.vocab_size, c.dim, false,
      kLogitRowsPerPass);
  return out;
}

}  // namespace qt
