// The CPU backend's MoE block, the same steps as on a device: router logits (fp32 activations), gating, init
// routing (routed rows sorted by expert and their rows gathered), one grouped gate/up call and one grouped
// down call over every expert, and finalize. The step definitions are kernels_src/moe's CPU references.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels_src/cpu_matvec/quantized_matvec.h"
#include "kernels_src/moe/moe_reference.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/q8_repack.h"

namespace qt::rt {

void CpuBackend::moe(const MoeBlock& b, Act x_act, int64_t m, Act out_act) {
  if (m <= 0) return;
  const int64_t experts = b.gate->experts, k = b.top_k, dim = b.router->cols, hidden = b.gate->base.rows;
  const int64_t count = m * k;
  std::vector<float> logits(size_t(m * experts));
  matmul(*b.router, x_act, m, host(logits.data()), MatmulMode::kExact);
  std::vector<int32_t> ids(static_cast<size_t>(count));
  std::vector<float> weights(static_cast<size_t>(count));
  kernels::moe::gating(logits.data(), m, experts, k, b.renormalize, ids.data(), weights.data());

  const kernels::moe::InitRouting r =
      kernels::moe::init_routing(ids.data(), m, k, experts, 0, experts, kernels::moe::TokenCounts::Count);
  std::vector<int64_t> offsets(size_t(experts) + 1, 0);
  for (int64_t e = 0; e < experts; ++e) offsets[size_t(e) + 1] = offsets[size_t(e)] + r.expert_tokens[size_t(e)];
  // The routed rows' buffers are kept from call to call: a 512-token prompt's take 90 MB per layer, which
  // freshly allocated would be faulted in and zeroed by one thread on every call. Every element is written
  // before it is read. The copies in and out are split over the pool like the element-wise ops.
  float* xe = grown(moe_rows_.expanded, count * dim);
  float* gate = grown(moe_rows_.gate, count * hidden);
  float* up = grown(moe_rows_.up, count * hidden);
  float* y = grown(moe_rows_.down, count * dim);
  const float* x = x_act.f32();
  split_rows(count, dim, [&](int64_t p0, int64_t p1) {  // kernels::moe::expand_rows, split
    for (int64_t p = p0; p < p1; ++p) std::copy_n(x + r.sorted_row[size_t(p)] / k * dim, dim, xe + p * dim);
  });

  const ExpertStack* front[2] = {b.gate, b.up};
  float* front_out[2] = {gate, up};
  grouped_matmul(front, front_out, 2, xe, offsets);
  silu_mul(host(gate), host(up), count * hidden);
  float* down_out[1] = {y};
  grouped_matmul(&b.down, down_out, 1, gate, offsets);
  float* out = out_act.f32();
  split_rows(m, k * dim, [&](int64_t t0, int64_t t1) {
    kernels::moe::finalize(y, r.expanded_row_idx.data() + t0 * k, weights.data() + t0 * k, t1 - t0, k, dim,
                           out + t0 * dim);
  });
}

// The fast path quantizes each expert's rows once and splits every (matrix, expert, block of output rows)
// over the pool in one pass, so decode's k small matmuls share the threads instead of taking turns. Experts
// that have the GEMM layout go through it first (grouped_gemm_q8); the rest run here. The reference
// path, float weights and unpacked types run expert by expert through matmul().
void CpuBackend::grouped_matmul(const ExpertStack* const* stacks, float* const* ys, int count, const float* x,
                                const std::vector<int64_t>& offsets) {
  const int64_t experts = int64_t(offsets.size()) - 1, K = stacks[0]->base.cols;
  std::vector<char> left(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) left[size_t(e)] = offsets[size_t(e) + 1] > offsets[size_t(e)];
  if (!options_.reference) {
    bool q8 = true;
    for (int s = 0; s < count; ++s) q8 = q8 && repackable_panels(stacks[s]->base);
    if (q8) grouped_gemm_q8(stacks, ys, count, x, offsets, left);
    if (std::find(left.begin(), left.end(), 1) == left.end()) return;
  }
  // The packed layout of every expert (made by prepare()), or fast = false if any cannot take the int8 path.
  bool fast = !options_.reference && weight_traits(stacks[0]->base.type).quantized;
  std::vector<const PackedMatrix*> packs(static_cast<size_t>(count * experts), nullptr);
  for (int s = 0; fast && s < count; ++s)
    for (int64_t e = 0; fast && e < experts; ++e) {
      const PackedMatrix& p = packed(stacks[s]->expert(e));
      packs[size_t(s * experts + e)] = &p;
      fast = p.kind != PackedMatrix::Kind::kUnpacked && p.group == packs[0]->group;
    }
  if (!fast) {
    for (int s = 0; s < count; ++s) {
      const int64_t N = stacks[s]->base.rows;
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t r0 = offsets[size_t(e)], rows = offsets[size_t(e) + 1] - r0;
        if (left[size_t(e)]) matmul(stacks[s]->expert(e), host(x + r0 * K), rows, host(ys[s] + r0 * N));
      }
    }
    return;
  }
  const int64_t group = packs[0]->group;
  std::vector<QuantizedRows> xq(static_cast<size_t>(experts));
  pool_.parallel_for(experts, 1, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t r0 = offsets[size_t(e)], rows = offsets[size_t(e) + 1] - r0;
      if (left[size_t(e)]) quantize_rows(x + r0 * K, rows, K, group, xq[size_t(e)]);
    }
  });
  struct Work {
    int s;
    int64_t e, n0, n1;
  };
  std::vector<Work> work;
  for (int s = 0; s < count; ++s)
    for (int64_t e = 0; e < experts; ++e) {
      if (!left[size_t(e)]) continue;
      const QTensor w = stacks[s]->expert(e);
      const int64_t step = rows_per_task(w);
      for (int64_t n = 0; n < w.rows; n += step) work.push_back({s, e, n, std::min(w.rows, n + step)});
    }
  pool_.parallel_for(int64_t(work.size()), 1, [&](int64_t w0, int64_t w1) {
    for (int64_t i = w0; i < w1; ++i) {
      const Work& t = work[size_t(i)];
      const int64_t r0 = offsets[size_t(t.e)], rows = offsets[size_t(t.e) + 1] - r0;
      const PackedMatrix& p = *packs[size_t(t.s * experts + t.e)];
      quantized_rows(*kernels_, p, xq[size_t(t.e)], rows, t.n0, t.n1, ys[t.s] + r0 * p.rows);
    }
  });
}

// Experts with the GEMM layout (prepare() gives it to every Q8_0 and INT8_GW_SYM stack) take the dense
// matrices' panel GEMM, and gemm_q8 runs every (matrix, expert, run of panels) against all of that expert's
// rows, so prefill reads each panel once for its 30-odd tokens. Clears left[e] for the experts it ran.
void CpuBackend::grouped_gemm_q8(const ExpertStack* const* stacks, float* const* ys, int count, const float* x,
                                 const std::vector<int64_t>& offsets, std::vector<char>& left) {
  const int64_t experts = int64_t(offsets.size()) - 1;
  std::vector<const RepackedQ8*> mats(size_t(count * experts), nullptr);
  bool any = false;
  for (int64_t e = 0; e < experts; ++e) {
    if (!left[size_t(e)]) continue;
    bool all = true;
    for (int s = 0; s < count; ++s) {
      mats[size_t(s * experts + e)] = repacked(stacks[s]->expert(e));
      all = all && mats[size_t(s * experts + e)] != nullptr;
    }
    if (!all) {
      for (int s = 0; s < count; ++s) mats[size_t(s * experts + e)] = nullptr;
      continue;
    }
    left[size_t(e)] = 0;
    any = true;
  }
  if (any) gemm_q8(mats.data(), ys, count, x, offsets);
}

}  // namespace qt::rt
