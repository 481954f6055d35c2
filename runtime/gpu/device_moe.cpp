// The device backend's MoE block: router linear, moe_gating, the grouped gate/up (SwiGLU) and down families
// (each plan starts with its own block alignment, for its own BLOCK_M) and moe_finalize, all queued on the
// device; routed rows are t * top_k + j throughout, so finalize reads the down output through the identity.
// At decode with the norms fused, frag-layout experts run as two routed streaming GEMVs on the router's logits
// instead (kernels_src/moe_stream): gate|up with SwiGLU, then down weighted and added into the hidden state.
#include <numeric>

#include "common/error.h"
#include "kernels_src/moe_stream/moe_stream_family.h"
#include "runtime/gpu/device_act.h"
#include "runtime/gpu/device_backend.h"

namespace qt::rt {

void DeviceBackend::moe(const MoeBlock& b, Act x, int64_t m, Act out) { moe_block(b, x, m, out, false); }

// Only where fuses_norm() said so for the layer: the device has no add of its own.
void DeviceBackend::moe_residual(const MoeBlock& b, Act xn, int64_t m, Act x, Act) {
  ++group_counts_.moe_residual;
  moe_block(b, xn, m, x, true);
}

void DeviceBackend::moe_block(const MoeBlock& b, Act x, int64_t m, Act out, bool residual) {
  if (m <= 0) return;
  const DeviceTensor& gate = weights_.tensor(b.gate->base);
  const DeviceTensor& up = weights_.tensor(b.up->base);
  const DeviceTensor& down = weights_.tensor(b.down->base);
  const int64_t experts = gate.experts, k = b.top_k, dim = gate.cols, hidden = gate.rows, count = m * k;

  grow(moe_.logits, size_t(h16(m * experts)), size_t(h16(m * experts)));
  grow(moe_.ids, size_t(count) * 4, size_t(count) * 4);
  grow(moe_.weights, size_t(count) * 4, size_t(count) * 4);
  grow(moe_.h, size_t(h16(count * hidden)), size_t(h16(count * hidden)));
  grow(moe_.y, size_t(h16(count * dim)), size_t(h16(count * dim)));
  if (moe_.rows_filled < count) {
    grow(moe_.rows, size_t(count) * 4, size_t(count) * 4);
    std::vector<int32_t> identity(static_cast<size_t>(count));
    std::iota(identity.begin(), identity.end(), 0);
    queue_.flush();
    device_.copy_to_device(moe_.rows.ptr(), identity.data(), identity.size() * 4);
    moe_.rows_filled = count;
  }

  const Act logits{moe_.logits.ptr().addr, ActType::F16};
  linear(weights_.tensor(*b.router), x, m, logits);
  // Every stack of experts in the frag layout (DeviceWeights::add_stack decides per tensor: a Q8_0 stack whose
  // scales fp16 cannot hold keeps the file layout), of one type.
  const bool all_frag = gate.arrays.count("bq") && up.arrays.count("bq") && down.arrays.count("bq") &&
                        up.type == gate.type && down.type == gate.type;
  if (residual && all_frag) {
    const kernels::Shape front =
        kernels::moe_stream::gate_up_shape(m, experts, k, b.renormalize, dim, hidden, gate.group);
    const kernels::Shape back = kernels::moe_stream::down_shape(m, experts, k, b.renormalize, dim, hidden, down.group);
    if (kernels::moe_stream::serves_decode(gate.type, front, back))
      return moe_stream(gate, up, down, x, m, k, out, front, back);
  }
  Bindings g;
  g.buf("logits", moe_.logits.ptr(), h16(m * experts)).buf("ids", moe_.ids.ptr(), count * 4);
  g.buf("weights", moe_.weights.ptr(), count * 4);
  run("moe_gating", nullptr, kernels::Shape{{"M", "E", "K", "R"}, {m, experts, k, b.renormalize ? 1 : 0}, "router"}, g);

  const bool trtllm = options_.trtllm_int8 &&
                      (gate.type == WeightType::INT8_GW_SYM || gate.type == WeightType::INT8_GW_ASYM);
  const bool frag = gate.arrays.count("bq") > 0;  // stored in the frag layout (DeviceWeights::add_stack)
  const std::string suffix = frag ? ".frag" : trtllm ? ".trtllm" : "";
  const std::vector<std::string> dims = {"T", "E", "TOPK", "N", "K", "G"};
  Bindings front;
  front.buf("x", dp(x), h16(m * dim)).buf("ids", moe_.ids.ptr(), count * 4);
  for (const auto& [name, a] : gate.arrays) front.buf("gate_" + name, a.ptr, a.bytes);
  for (const auto& [name, a] : up.arrays) front.buf("up_" + name, a.ptr, a.bytes);
  front.buf("h", moe_.h.ptr(), h16(count * hidden));
  run("moe_gate_up" + suffix, &gate.type,
      kernels::Shape{dims, {m, experts, k, hidden, dim, gate.group}, "expert.w1+w3"}, front);

  Bindings back;
  back.buf("x", moe_.h.ptr(), h16(count * hidden)).buf("ids", moe_.ids.ptr(), count * 4);
  for (const auto& [name, a] : down.arrays) back.buf(name, a.ptr, a.bytes);
  back.buf("y", moe_.y.ptr(), h16(count * dim));
  run("moe_down" + suffix, &down.type, kernels::Shape{dims, {m, experts, k, dim, hidden, down.group}, "expert.w2"},
      back);

  Bindings fin;
  fin.buf("y", moe_.y.ptr(), h16(count * dim)).buf("rows", moe_.rows.ptr(), count * 4);
  fin.buf("weights", moe_.weights.ptr(), count * 4).buf("out", dp(out), h16(m * dim));
  const kernels::Shape finalize{{"M", "K", "H"}, {m, k, dim}, "finalize"};
  if (!residual) return run("moe_finalize", nullptr, finalize, fin);
  launcher_.run(chooser_.choose_fused("moe_finalize_residual", "moe_finalize", nullptr, finalize), finalize, fin);
}

// From the router's logits: h = the routed rows' SwiGLU, then out += sum_j w * (h W2), one launch each, every
// block picking its token's experts itself.
void DeviceBackend::moe_stream(const DeviceTensor& gate, const DeviceTensor& up, const DeviceTensor& down, Act x,
                               int64_t m, int64_t top_k, Act out, const kernels::Shape& front,
                               const kernels::Shape& back) {
  const int64_t count = m * top_k, dim = gate.cols, hidden = gate.rows;
  Bindings g;
  const int64_t experts = gate.experts;
  g.buf("x", dp(x), h16(m * dim)).buf("logits", moe_.logits.ptr(), h16(m * experts));
  for (const auto& [name, a] : gate.arrays) g.buf("gate_" + name, a.ptr, a.bytes);
  for (const auto& [name, a] : up.arrays) g.buf("up_" + name, a.ptr, a.bytes);
  g.buf("h", moe_.h.ptr(), h16(count * hidden));
  bind_counters(g, count * (hidden / 64));
  run(kernels::moe_stream::kGateUpOp, &gate.type, front, g);

  Bindings d;
  d.buf("x", moe_.h.ptr(), h16(count * hidden)).buf("logits", moe_.logits.ptr(), h16(m * experts));
  for (const auto& [name, a] : down.arrays) d.buf(name, a.ptr, a.bytes);
  d.buf("out", dp(out), h16(m * dim));
  bind_counters(d, m * ((dim + 63) / 64));
  run(kernels::moe_stream::kDownResidualOp, &down.type, back, d);
  ++group_counts_.moe_stream;
}

}  // namespace qt::rt
