#include "kernels_src/attention/attention_problem.h"

#include "kernels_src/attention/attention_family.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "common/rng.h"
#include "kernels_src/registry/family_util.h"

namespace qt::kernels::attention {

const std::vector<std::string> kDims = {"M", "H", "KVH", "D", "C", "P"};

namespace {

using Role = BufferSpec::Role;

}  // namespace

AttentionProblem problem(const Shape& s) {
  AttentionProblem p;
  p.m = s["M"], p.heads = s["H"], p.kv_heads = s["KVH"], p.head_dim = s["D"], p.capacity = s["C"], p.pos0 = s["P"];
  return p;
}

std::string shape_check(const AttentionProblem& p) {
  if (p.m < 1 || p.heads < 1 || p.kv_heads < 1 || p.head_dim < 1 || p.capacity < 1)
    return "M, H, KVH, D and C must be positive";
  if (p.heads % p.kv_heads) return "H must be a multiple of KVH (grouped-query attention)";
  if (p.head_dim % 8) return "the head dim D must be a multiple of 8 (16-byte rows)";
  if (p.pos0 < 0 || p.pos0 + p.m > p.capacity) return "the queries' rows P .. P+M-1 must be in the cache: P + M <= C";
  if (p.capacity > INT32_MAX / 2 || p.m * p.heads * p.head_dim > INT32_MAX)
    return "C and M*H*D must stay below 2^31 (32-bit kernel indexing)";
  return "";
}

std::vector<BufferSpec> attention_buffers(const AttentionProblem& p) {
  const int64_t qd = p.heads * p.head_dim, kvd = p.kv_heads * p.head_dim;
  return {{"q", DType::F16, p.m * qd, Role::Input},
          {"k_cache", DType::F16, p.capacity * kvd, Role::Input},
          {"v_cache", DType::F16, p.capacity * kvd, Role::Input},
          {"pos", DType::I32, 1, Role::Input},
          {"out", DType::F16, p.m * qd, Role::Output}};
}

// Scores need a spread for the softmax to be more than an average: q and k in [-2, 2) give
// D^-0.5 * q.k a standard deviation of about 4/3.
HostBuffers make_attention_inputs(const Shape& shape, uint64_t seed) {
  const AttentionProblem p = problem(shape);
  const int64_t qd = p.heads * p.head_dim, kvd = p.kv_heads * p.head_dim, used = (p.pos0 + p.m) * kvd;
  Rng rng(seed);
  auto fill = [&](int64_t n, int64_t live, double lo, double hi) {
    std::vector<uint16_t> v(static_cast<size_t>(n), uint16_t(0x7E00));  // fp16 quiet NaN
    for (int64_t i = 0; i < live; ++i) v[size_t(i)] = float_to_half_bits(float(lo + (hi - lo) * rng.uniform()));
    return v;
  };
  HostBuffers in;
  in["q"] = bytes_of(fill(p.m * qd, p.m * qd, -2, 2));
  in["k_cache"] = bytes_of(fill(p.capacity * kvd, used, -2, 2));
  in["v_cache"] = bytes_of(fill(p.capacity * kvd, used, -1, 1));
  const int32_t pos0 = static_cast<int32_t>(p.pos0);
  in["pos"].resize(4);
  std::memcpy(in["pos"].data(), &pos0, 4);
  return in;
}

// Tolerance, relative to max|v| (which bounds |out|):
//  * a score is an fp32 sum of D exact fp16 products: its error is at most D * 2^-24 * sum|q k| (times the
//    scale), and an error e in the scores moves the normalised weights by a factor within exp(+-2e);
//  * __expf and the fp32 sums of l and of p v over P + M keys: 2^-18 + (P + M) * 2^-24;
//  * prefill rounds each weight to fp16 before P V (l keeps the fp32 weights): up to 2^-11, given 2^-10;
//  * the fp16 output rounds once: rel 2^-10 covers it.
Expected expected_attention(const Shape& shape, const HostBuffers& in, bool p_in_fp16) {
  const AttentionProblem p = problem(shape);
  const AttentionResult r =
      reference_attention(p, from_bytes<uint16_t>(in.at("q")), from_bytes<uint16_t>(in.at("k_cache")),
                          from_bytes<uint16_t>(in.at("v_cache")));
  Expected e;
  e.buffer = "out";
  e.values.assign(r.out.begin(), r.out.end());
  const double score_err = double(p.head_dim) * std::ldexp(1.0, -24) * r.max_score;
  e.abs_tol = r.max_abs_v * (2.0 * score_err + std::ldexp(1.0, -18) + double(p.pos0 + p.m) * std::ldexp(1.0, -24) +
                             (p_in_fp16 ? std::ldexp(1.0, -10) : 0.0));
  e.rel_tol = std::ldexp(1.0, -10);
  return e;
}

std::vector<Shape> decode_model_shapes(const ModelConfig& c) {
  const int64_t cap = std::max<int64_t>(c.max_seq_len, 1);
  std::vector<Shape> out;
  // Flash-decoding's goals are stated at 4K and 32K (issue 26); each at the shape the runtime chooses by, so a
  // tuned winner is found exactly.
  for (int64_t ctx : {int64_t(512), int64_t(4096), int64_t(32768)}) {
    Shape s = choice_shape(1, c.n_heads, c.n_kv_heads, c.head_dim, std::min(cap, ctx), cap);
    if (!out.empty() && out.back().values == s.values) continue;
    s.label = "decode at context " + std::to_string(s["C"]);
    out.push_back(s);
  }
  return out;
}

std::vector<Shape> prefill_model_shapes(const ModelConfig& c) {
  const int64_t cap = std::max<int64_t>(c.max_seq_len, 1);
  std::vector<Shape> out;
  const int64_t prompt = std::min<int64_t>(512, cap);
  out.push_back(choice_shape(prompt, c.n_heads, c.n_kv_heads, c.head_dim, prompt, cap));
  out.back().label = "prefill";
  if (cap >= 1024 + 64) {
    out.push_back(choice_shape(64, c.n_heads, c.n_kv_heads, c.head_dim, 1024 + 64, cap));
    out.back().label = "follow-up turn after 1024";
  }
  return out;
}

Shape choice_shape(int64_t m, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t tokens, int64_t capacity) {
  int64_t bucket = 1;
  while (bucket < tokens) bucket *= 2;
  bucket = std::min(bucket, capacity);
  return Shape{kDims, {m, heads, kv_heads, head_dim, bucket, bucket - m}, "attention"};
}

}  // namespace qt::kernels::attention
