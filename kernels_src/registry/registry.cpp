#include "kernels_src/registry/registry.h"

#include <fstream>
#include <mutex>
#include <sstream>

#include "common/error.h"
#include "common/paths.h"
#include "kernels_src/activation/swiglu_family.h"
#include "kernels_src/attention/attention_family.h"
#include "kernels_src/awq/awq_family.h"
#include "kernels_src/cpu_matvec/cpu_matvec_family.h"
#include "kernels_src/embedding/embedding_family.h"
#include "kernels_src/f16_gemm/f16_gemm_family.h"
#include "kernels_src/f16_linear/f16_gemv_family.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/gate_up/gate_up_family.h"
#include "kernels_src/memcopy/mem_copy_family.h"
#include "kernels_src/memread/mem_read_family.h"
#include "kernels_src/moe/moe_family.h"
#include "kernels_src/moe_stream/moe_stream_family.h"
#include "kernels_src/moe_wgmma/moe_wgmma_family.h"
#include "kernels_src/norm/rmsnorm_family.h"
#include "kernels_src/q8_0/q8_family.h"
#include "kernels_src/rope_kv/rope_kv_family.h"
#include "kernels_src/sampling/argmax_family.h"

namespace qt::kernels {

namespace {

std::vector<const KernelFamily*> builtin_families() {
  // One line per family (or per generated list of families). Among families serving the same op, this order
  // is the runtime's preference when no tuned result decides: decode GEMVs come before GEMMs, and the stream
  // GEMVs before the frag GEMVs (the H200 run of 29 Nov timed the stream GEMV faster on o_proj, down_proj and
  // k/v even on its register ring; results/gpu-h200-2026-11-29/README.md).
  std::vector<const KernelFamily*> list = {
      &awq::dequant_family(),
      &awq::gemv_family(),
      &awq::gemm_family(),
      &frag::awq_repack_family(),
      &frag::int8_repack_family(),
      &frag::awq_dequant_family(),
      &frag::int8_dequant_family(),
      &frag::awq_stream_gemv_family(),
      &frag::int8_stream_gemv_family(),
      &frag::awq_gemv_family(),
      &frag::awq_gemm_family(),
      &frag::int8_gemv_family(),
      &frag::int8_gemm_family(),
      &frag::awq_gate_up_family(),
      &frag::int8_gate_up_family(),
      &frag::awq_wgmma_gemm_family(),
      &frag::int8_wgmma_gemm_family(),
      &frag::q8_0_repack_family(),
      &frag::q8_0_dequant_family(),
      &frag::q8_0_stream_gemv_family(),
      &frag::q8_0_gemv_family(),
      &frag::q8_0_gemm_family(),
      &frag::q8_0_wgmma_gemm_family(),
      &frag::awq_smem_gemm_family(),
      &frag::int8_smem_gemm_family(),
      &frag::q8_0_smem_gemm_family(),
      &frag::q8_0_gate_up_family(),
      &frag::awq_norm_gemv_family(),
      &frag::int8_norm_gemv_family(),
      &frag::q8_0_norm_gemv_family(),
      &frag::awq_residual_gemv_family(),
      &frag::int8_residual_gemv_family(),
      &frag::q8_0_residual_gemv_family(),
      &frag::awq_norm_gate_up_family(),
      &frag::int8_norm_gate_up_family(),
      &frag::q8_0_norm_gate_up_family(),
      &cpu_matvec::q8_0_family(),
      &cpu_matvec::int8_sym_family(),
      &cpu_matvec::int8_asym_family(),
      &cpu_matvec::awq_int4_family(),
      &norm::rmsnorm_family(),
      &activation::swiglu_family(),
      &sampling::argmax_family(),
      &f16_linear::gemv_family(),
      &gate_up::q8_0_family(),
      &gate_up::awq_int4_family(),
      &q8_0::dequant_family(),
      &q8_0::gemv_family(),
      &q8_0::gemm_family(),
      &f16_gemm::gemm_family(),
      &rope_kv::qk_norm_rope_kv_family(),
      &attention::decode_family(),
      &attention::decode_rope_family(),
      &attention::prefill_family(),
      &moe::gating_family(),
      &moe::init_routing_family(),
      &moe::align_family(),
      &moe::finalize_family(),
      &moe::finalize_residual_family(),
      &memcopy::copy_family(),
      &memread::read_family(),
      &memread::bulk_read_family(),
  };
  list.insert(list.end(), embedding::families().begin(), embedding::families().end());
  list.insert(list.end(), frag::residual_norm_gemv_families().begin(), frag::residual_norm_gemv_families().end());
  list.insert(list.end(), moe::grouped_families().begin(), moe::grouped_families().end());
  list.insert(list.end(), moe_wgmma::families().begin(), moe_wgmma::families().end());
  list.insert(list.end(), moe_stream::families().begin(), moe_stream::families().end());
  return list;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::vector<const KernelFamily*>& families() {
  static std::vector<const KernelFamily*> f = builtin_families();
  return f;
}

}  // namespace

const std::vector<const KernelFamily*>& all_families() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return families();
}

const KernelFamily& find_family(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::string known;
  for (const KernelFamily* f : families()) {
    if (f->name == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  throw Error("unknown kernel family '" + name + "' (known: " + known + ")");
}

void add_family(const KernelFamily* family) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const KernelFamily*& f : families())
    if (f->name == family->name) {
      f = family;
      return;
    }
  families().push_back(family);
}

std::string op_weight_layout(const std::string& op) {
  if (op.size() > 5 && op.compare(op.size() - 5, 5, ".frag") == 0) return "frag";
  if (op.size() > 7 && op.compare(op.size() - 7, 7, ".trtllm") == 0) return "trtllm";
  return "file";
}

std::string default_weight_layout(const std::string& op, WeightType t, bool head) {
  const std::string base = op_weight_layout(op) == "frag" ? op.substr(0, op.size() - 5) : op;
  const bool dense = base == "linear" || base == "gate_up_swiglu" || base == "dequant";
  return dense && !head && frag::frag_layout_holds(t) ? "frag" : "file";
}

bool names_head(const std::string& label, bool head) {
  if (label.empty()) return !head;
  std::stringstream parts(label);
  for (std::string part; std::getline(parts, part, '+');)
    if ((part == "lm_head" || part == "router") == head) return true;
  return false;
}

namespace {

// Whether the runtime reads a weight of one of f's types, a head or not, in the layout f reads.
bool dispatched_for(const KernelFamily& f, bool head) {
  if (f.op == "repack") return false;
  if (f.weight_types.empty()) return true;
  // The Hopper grouped GEMMs read experts in the frag layout, which the runtime loads only when asked
  // (--expert-layout frag): tuned beside the file-layout grouped GEMMs all the same, so that a GPU run
  // measures both generations before either becomes the default.
  if (!head && op_weight_layout(f.op) == "frag" && f.op.rfind("moe_", 0) == 0) return true;
  for (WeightType t : f.weight_types)
    if (default_weight_layout(f.op, t, head) == op_weight_layout(f.op)) return true;
  return false;
}

}  // namespace

bool dispatched_by_default(const KernelFamily& f) { return dispatched_for(f, false) || dispatched_for(f, true); }

bool dispatched_by_default(const KernelFamily& f, const Shape& s) {
  return (dispatched_for(f, false) && names_head(s.label, false)) || (dispatched_for(f, true) && names_head(s.label, true));
}

std::string read_family_source(const KernelFamily& f) {
  if (f.source.empty()) throw Error("kernel family " + f.name + " runs on the host and has no device source", kExitFailure);
  const std::string path = source_root() + "/kernels_src/" + f.source;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the source of kernel family " + f.name + " (set QTUNE_HOME?)", kExitFailure);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace qt::kernels
